"""The sweeper's one use case: end what would otherwise wait forever. Built alone by
``sweeper_wiring``, on the table and the finalize queue: the sweeper loads nothing else."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.ledger.closes import Closes
from ..adapters.ledger.runs import Runs
from ..adapters.queues import FinalizeQueue


@dataclass
class SweepDeadlines:
    runs: Runs  # DynamoDB: the open-runs index, by deadline and by finalize lease
    closes: Closes  # DynamoDB: the close, on the run's item
    queue: FinalizeQueue  # SQS: finalize
    clock: Callable[[], float] = time.time

    def sweep(self) -> list[tuple[str, str]]:
        """Close every open run past its deadline (absent shards become missing), and finalize
        again every run whose finalizer's lease ran out (it died: a timeout, a lost host)."""
        now = int(self.clock())
        due = self.runs.open_runs_past(now)
        for project, run_id in due:
            self.closes.request_close(project, run_id, [])
            self.queue.request(project, run_id, "deadline")
        for project, run_id in self.runs.stalled_finalizing(now):
            self.queue.request(project, run_id, "lease-expired")
        return due
