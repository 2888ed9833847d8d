"""A close's barrier (``domain.barrier``) applied to a run: what it reads, what it says while it waits,
and the bundles it counts itself when their arrival is overdue."""

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.bucket import Bucket
from ..adapters.ledger import Closes, Reads
from ..adapters.metrics import Metrics
from ..adapters.queues import FinalizeQueue
from ..domain.barrier import EVENT_SECONDS, Grant, Landed, Verdict, judge, pending
from ..domain.closing import Awaiting
from ..domain.keys import bundle_key, run_bundles_prefix
from ..domain.records import OPEN, RunRecord
from ..domain.timestamps import iso
from ..settings import Settings
from ..use_cases.record_arrival import RecordArrival
from ..use_cases.reports import Reports

log = logging.getLogger(__name__)


@dataclass
class CloseBarrier:
    settings: Settings
    reads: Reads  # DynamoDB: the run, its grants and its shards
    closes: Closes  # DynamoDB: what the close waits for, and what it gave up on
    store: Bucket  # S3: the run's bundles listed (sizes, when each PUT was answered)
    queue: FinalizeQueue  # SQS: the finalize asked again at the wait's deadline
    arrivals: RecordArrival  # a bundle in the bucket whose arrival is overdue: counted by the close itself
    reports: Reports
    metrics: Metrics
    clock: Callable[[], float] = time.time

    def passed(self, project: str, run_id: str, handed_over: bool = False) -> int | None:
        """A close is a barrier (``domain.barrier``): the number of uploads granted in the run when
        nothing it is owed can still come (the claim is made at that count, so none slips in between);
        None while something can, the finalize asked again by the arrival awaited or at the wait's
        deadline, never on a timer. A bundle in the bucket past its backstop is counted here, once. A
        run no longer open (a retry) has passed it."""
        now, expiry = self.clock(), self.settings.presign_expiry_seconds
        view = self.reads.barrier_view(project, run_id)
        if view is None or view.run.state != OPEN:
            return view.run.grants if view else 0
        run = view.run
        due = pending(view.grants, view.shards, frozenset(run.given_up))
        landed = self._landed(project, run_id, due)
        verdict = judge(due, landed, run.close.by if run.close.requested else None, now, expiry, self._backstop)
        if verdict.overdue and not handed_over:
            for grant in verdict.overdue:
                self._hand_over(project, run_id, grant, landed[grant.upload_id])
            return self.passed(project, run_id, handed_over=True)
        self._say_awaiting(run, verdict)
        if not verdict:
            return run.grants
        self.metrics.add("ClosesWaiting", 1, "Count")
        self.queue.request_in(project, run_id, "barrier", max(1, math.ceil(verdict.next_look - now)))
        return None

    def _say_awaiting(self, run: RunRecord, verdict: Verdict) -> None:
        """What the close waits for, on the run as its readers are told (nothing: it waits no more)."""
        said = (
            Awaiting(verdict.waits[0].grant.name, verdict.waits[0].landed, len(verdict.waits), verdict.until)
            if verdict
            else None
        )
        if said != run.close.awaiting and self.closes.note_awaiting(run.project, run.run_id, said):
            self.reports.publish(run.project, run.run_id)  # the wait is said, and what it waits for

    def _backstop(self, size: int) -> float:
        return EVENT_SECONDS + self.settings.arrival_reserve(size)

    def _landed(self, project: str, run_id: str, due: list[Grant]) -> dict[str, Landed]:
        """The pending grants' bundles in the bucket, by upload id: one list of the run's bundles (a HEAD
        of an absent key is a 403 to a role whose ListBucket is held to prefixes, as the functions' are:
        no answer to tell "not there" by), none when nothing is pending."""
        if not due:
            return {}
        listed = self.store.listed_under(run_bundles_prefix(project, run_id))
        return {
            g.upload_id: Landed(*found)
            for g in due
            if (found := listed.get(bundle_key(project, run_id, g.shard, g.upload_id)))
        }

    def _hand_over(self, project: str, run_id: str, grant: Grant, landed: Landed) -> None:
        """A bundle in the bucket whose arrival did not come within its backstop (its event lost, or
        its arrival failing): counted here, as its arrival would (once, whoever counts it first). If
        that fails too, the close goes on without it, saying why and what mends it."""
        key = bundle_key(project, run_id, grant.shard, grant.upload_id)
        try:
            self.arrivals.record(key, landed.size)
        except Exception as exc:
            log.exception("the close could not count %s", key)
            reason = (
                f"in the bucket since {iso(landed.at)}, its arrival failed ({type(exc).__name__}: {exc}): "
                "redrive the arrivals' dead-letter queue (codspeed-aggregator redrive --queue arrivals), and the "
                "bundle counts in the run's next attempt"
            )
            self.closes.give_up(project, run_id, grant.shard, reason)
