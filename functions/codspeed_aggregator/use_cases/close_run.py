"""Close a run: ``close`` from a client, a CI webhook saying the workflow finished, or the
sweeper at a run's deadline. Each marks the run closing and asks the finalizer to forward it."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_wire.api import CloseAnswer, CloseRequest

from ..adapters.queues import FinalizeQueue
from ..adapters.ledger import Reads, Runs
from ..domain.errors import NotFound, Unprocessable
from ..domain.ledger import OPEN


@dataclass
class CloseRun:
    reads: Reads  # DynamoDB: the run as it stands
    runs: Runs  # DynamoDB: the close, and the open-runs index the sweeper reads
    queue: FinalizeQueue  # SQS: finalize
    clock: Callable[[], float] = time.time

    def close(self, request: CloseRequest, reason: str = "close") -> CloseAnswer:
        snapshot = self.reads.snapshot(request.project, request.run_id)
        if snapshot is None:
            raise NotFound(f"no run {request.run_id} for project {request.project}")
        expected = snapshot.run.manifest.expected_names()
        unknown = [name for name in request.skip if expected is not None and name not in expected]
        if unknown:
            raise Unprocessable(f"cannot skip {', '.join(unknown)}: not in the run's manifest ({snapshot.run.manifest.describe()})")
        state = snapshot.run.state
        if state != OPEN:
            return CloseAnswer(project=request.project, run_id=request.run_id, state=state,
                               message=f"run is already {state}: nothing to close")
        first = self.runs.request_close(request.project, request.run_id, list(request.skip), reason)
        self.queue.request(request.project, request.run_id, reason)
        message = "the shards in so far will be merged and forwarded" if first else "a close was already under way"
        return CloseAnswer(project=request.project, run_id=request.run_id, state="closing", message=message)

    def close_finished_ci_run(self, project: str, run_id: str) -> list[str]:
        """CI says the workflow run finished: close its run, if it has one still open."""
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
