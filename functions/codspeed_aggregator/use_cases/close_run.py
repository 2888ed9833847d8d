"""Close a run: ``close`` from a client, a CI webhook saying the workflow finished, or the
sweeper at a run's deadline. Each marks the run closing and asks the finalizer to forward it.
A close names a run (its latest attempt) or one attempt of it (``<run>~N``)."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_rules.names import split_shard_key
from codspeed_wire.api import MAX_SHARDS, CloseAnswer, CloseRequest

from ..adapters.ledger import Baselines, Reads, Runs
from ..adapters.queues import FinalizeQueue
from ..domain.baseline import branch_of
from ..domain.errors import NotFound, Unprocessable
from ..domain.ledger import OPEN, Snapshot
from ..settings import Settings


@dataclass
class CloseRun:
    settings: Settings
    reads: Reads  # DynamoDB: the run as it stands, and the baseline's shards a skip may name
    runs: Runs  # DynamoDB: the close, the run's attempts, and the open-runs index the sweeper reads
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run (what a skipped shard is carried from)
    queue: FinalizeQueue  # SQS: finalize
    clock: Callable[[], float] = time.time

    def close(self, request: CloseRequest, reason: str = "close") -> CloseAnswer:
        run_id = self.runs.attempt_of(request.project, request.run_id, self.settings.max_attempts)
        snapshot = self.reads.snapshot(request.project, run_id)
        if snapshot is None:
            raise NotFound(f"no run {request.run_id} for project {request.project}")
        self._check_skips(snapshot, request.skip)
        state = snapshot.run.state
        if state != OPEN:
            return CloseAnswer(
                project=request.project, run_id=run_id, state=state, message=f"run is already {state}: nothing to close"
            )
        first = self.runs.request_close(request.project, run_id, _new_skips(snapshot, request.skip), reason)
        self.queue.request(request.project, run_id, reason)
        if not first:
            message = "a close was already under way"
        elif snapshot.run.sends_parts:
            message = "the run ends with the shards in so far: each is upstream as its own part, or goes now"
        else:
            message = "the shards in so far will be merged and forwarded"
        return CloseAnswer(project=request.project, run_id=run_id, state="closing", message=message)

    def _check_skips(self, snapshot: Snapshot, skip: list[str]) -> None:
        """A skipped shard must be one the run can hold: one its manifest names, or, for a
        manifest by count (a CodSpeed workflow's jobs), one the run or its baseline run has seen
        or skipped (the baseline carried it from the run before, as this run will)."""
        if not skip:
            return
        run = snapshot.run
        expected = run.expected_names()
        known: set[str] | tuple[str, ...]
        if expected is None:
            baseline = self.baselines.baseline_for(
                run.project, branch_of(run.base_ref) or self.settings.default_branch, run.base_commits()
            )
            seen = self.reads.snapshot(run.project, baseline) if baseline else None
            keys = (*snapshot.shards, *run.skipped, *(seen.shards if seen else ()), *(seen.run.skipped if seen else ()))
            known = {split_shard_key(key)[0] for key in keys}  # a skip names a shard of every executor
            where = "shards of this run or of its baseline run" + (f" {baseline}" if baseline else " (none yet)")
        else:
            known, where = expected, f"the run's manifest ({run.describe()})"
        unknown = [name for name in skip if name not in known]
        if unknown:
            raise Unprocessable(f"cannot skip {', '.join(unknown)}: not among the {where}")
        if (count := len(run.skipped) + len(_new_skips(snapshot, skip))) > MAX_SHARDS:
            raise Unprocessable(
                f"run {run.run_id} of {run.project} would skip {count} shards: a run skips {MAX_SHARDS} at most"
            )

    def close_finished_ci_run(self, project: str, run_id: str) -> list[str]:
        """CI says the workflow run finished: close its latest attempt, if that one is still open."""
        run_id = self.runs.attempt_of(project, run_id, self.settings.max_attempts)
        snapshot = self.reads.snapshot(project, run_id)
        if snapshot is None or snapshot.run.state != OPEN:
            return []
        self.close(CloseRequest(project=project, run_id=run_id), reason="ci-finished")
        return [run_id]

    def sweep(self) -> list[tuple[str, str]]:
        """Close every open run past its deadline (absent shards become missing), and finalize
        again every run whose finalizer's lease ran out (it died: a timeout, a lost host)."""
        now = int(self.clock())
        due = self.runs.open_runs_past(now)
        for project, run_id in due:
            self.runs.request_close(project, run_id, [], "deadline")
            self.queue.request(project, run_id, "deadline")
        for project, run_id in self.runs.stalled_finalizing(now):
            self.queue.request(project, run_id, "lease-expired")
        return due


def _new_skips(snapshot: Snapshot, skip: list[str]) -> list[str]:
    """The names a close adds to those the run skips (an attempt's are its previous one's), each once."""
    return [name for name in dict.fromkeys(skip) if name not in snapshot.run.skipped]
