"""Close a run: ``close`` from a client, or a CI webhook saying the workflow finished (the sweeper
closes a run at its deadline: ``sweep_deadlines``). Each marks the run closing and asks the
finalizer to forward it.
A close names a run (its latest attempt) or one attempt of it (``<run>~N``)."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_rules.names import split_shard_key
from codspeed_wire.api import MAX_SHARDS, CloseAnswer, CloseRequest

from ..adapters.ledger import Baselines, Closes, Reads, Runs
from ..adapters.queues import FinalizeQueue
from ..domain.attempts import base_run_id
from ..domain.baseline import branch_of
from ..domain.closing import CiOrigin
from ..domain.errors import NotFound, Unprocessable
from ..domain.records import OPEN, Snapshot
from ..settings import Settings


@dataclass
class CloseRun:
    settings: Settings
    reads: Reads  # DynamoDB: the run as it stands, and the baseline's shards a skip may name
    runs: Runs  # DynamoDB: the run's attempts
    closes: Closes  # DynamoDB: the close, on the run's item
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run (what a skipped shard is carried from)
    queue: FinalizeQueue  # SQS: finalize
    clock: Callable[[], float] = time.time

    def close(self, request: CloseRequest, reason: str = "close", workflow: bool = False) -> CloseAnswer:
        """``request``'s CI run and attempt are what the CI vouched for (its handler drops those a caller
        without a token says); ``workflow``: the CI's webhook says every job of that attempt ended."""
        run_id = self.runs.attempt_of(request.project, request.run_id)
        snapshot = self.reads.snapshot(request.project, run_id)
        if snapshot is None:
            raise NotFound(f"no run {request.run_id} for project {request.project}")
        self._check_skips(snapshot, request.skip)
        state = snapshot.run.state
        if state != OPEN:
            return CloseAnswer(
                project=request.project, run_id=run_id, state=state, message=f"run is already {state}: nothing to close"
            )
        origin = CiOrigin(request.ci_run, request.ci_attempt, workflow) if request.ci_run else None
        first = self.closes.request_close(request.project, run_id, _new_skips(snapshot, request.skip), origin)
        self.queue.request(request.project, run_id, reason)
        return CloseAnswer(
            project=request.project,
            run_id=run_id,
            state="closing",
            message=_closing(origin, snapshot.run.forward.sends_parts) if first else "a close was already under way",
        )

    def _check_skips(self, snapshot: Snapshot, skip: list[str]) -> None:
        """A skipped shard must be one the run can hold: one its manifest names, or, for a
        manifest by count (a CodSpeed workflow's jobs), one the run or its baseline run has seen
        or skipped (the baseline carried it from the run before, as this run will)."""
        if not skip:
            return
        run = snapshot.run
        expected = run.expected_names()
        known, where = (
            self._seen(snapshot) if expected is None else (expected, f"the run's manifest ({run.describe()})")
        )
        unknown = [name for name in skip if name not in known]
        if unknown:
            raise Unprocessable(f"cannot skip {', '.join(unknown)}: not among the {where}")
        if (count := len(run.skipped) + len(_new_skips(snapshot, skip))) > MAX_SHARDS:
            raise Unprocessable(
                f"run {run.run_id} of {run.project} would skip {count} shards: a run skips {MAX_SHARDS} at most"
            )

    def _seen(self, snapshot: Snapshot) -> tuple[set[str], str]:
        """The shards a run whose manifest counts them (a CodSpeed workflow's jobs) may skip: those it or
        its baseline run saw or skipped, each of every executor; and where they were looked for."""
        run = snapshot.run
        branch = branch_of(run.base_ref) or self.settings.default_branch
        baseline = self.baselines.baseline_for(run.project, branch, run.base_commits())
        seen = self.reads.snapshot(run.project, baseline) if baseline else None
        keys = (*snapshot.shards, *run.skipped, *((*seen.shards, *seen.run.skipped) if seen else ()))
        where = "shards of this run or of its baseline run" + (f" {baseline}" if baseline else " (none yet)")
        return {split_shard_key(key)[0] for key in keys}, where

    def close_finished_ci_run(self, project: str, run_id: str, ci_attempt: int | None = None) -> list[str]:
        """CI says attempt ``ci_attempt`` of the workflow run finished: close the aggregator's attempt it
        ran in, if that one is still open. A late or redelivered event of an earlier CI attempt closes
        nothing a later CI attempt opened, whatever token its uploads used (an attempt opened after this
        webhook closed the one before is at least that one's next: ``RunAttempts``)."""
        run_id = self.runs.attempt_of(project, run_id)
        snapshot = self.reads.snapshot(project, run_id)
        if snapshot is None:
            return []
        said = snapshot.run.ci_attempt_said()
        if snapshot.run.state != OPEN:
            if ci_attempt is not None and (said is None or ci_attempt >= said):  # ended by its count, say
                self.closes.note_workflow_ended(project, run_id, CiOrigin(base_run_id(run_id), ci_attempt, True))
            return []
        opened_by = snapshot.run.attempt.ci
        if ci_attempt is not None and opened_by is not None and opened_by > ci_attempt:
            return []
        ci_run = base_run_id(run_id)
        request = CloseRequest(project=project, run_id=run_id, ci_run=ci_run, ci_attempt=ci_attempt)
        self.close(request, "ci-finished", workflow=True)
        return [run_id]


def _closing(origin: CiOrigin | None, sends_parts: bool) -> str:
    """What a close does, said when it is taken."""
    sent = "each shard upstream as its own part" if sends_parts else "the shards merged and forwarded"
    if origin is None:
        return (
            f"the run ends, {sent}, once every bundle in the bucket is counted and every upload URL handed out "
            "before the close is used or has expired"
        )
    attempt = f" (attempt {origin.attempt})" if origin.attempt else ""
    return (
        f"the run ends, {sent}, once every bundle in the bucket is counted: a job of CI run {origin.run}{attempt} "
        "with no bundle in the bucket is missing now; an upload asked from now on counts in the run's next attempt"
    )


def _new_skips(snapshot: Snapshot, skip: list[str]) -> list[str]:
    """The names a close adds to those the run skips (an attempt's are its previous one's), each once."""
    return [name for name in dict.fromkeys(skip) if name not in snapshot.run.skipped]
