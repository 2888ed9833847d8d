"""Record an arrival: a bundle landed in the bucket (an S3 event). Validate it, make it ready to
splice, count it once in its run (or, after the run was finalized, in its next attempt), publish
the partial report, and ask to finalize when the run is complete."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.bucket import MissingObject
from ..adapters.ledger import Reads, Runs, Shards
from ..adapters.metrics import Metrics
from ..adapters.queues import FinalizeQueue, Queue
from ..adapters.results_store import ResultsStore
from ..domain.arrival import Arrival, ArrivalView, Counted
from ..domain.attempts import RunAttempt, attempt_run_id, base_run_id
from ..domain.costs import shard_cost
from ..domain.errors import AttemptEnded, BadBundle, Conflict, existing
from ..domain.keys import parse_bundle_key
from ..domain.records import (
    ARRIVED,
    OPEN,
    GrantRecord,
    RunRecord,
    ShardRecord,
)
from ..domain.report import shown_as
from ..domain.results import ShardResults, measured
from ..domain.retries import redelivery_delay
from ..domain.timestamps import iso
from ..services.run_attempts import RunAttempts
from ..settings import Settings
from .bundle_validation import BundleValidation
from .reports import Reports

log = logging.getLogger(__name__)
GONE = (
    "its bundle was no longer in the bucket when its arrival was counted (a dead letter redriven after the "
    "lifecycle took it): nothing of it is counted"
)

MAX_DEFERRALS = 10  # times an event is sent again for lack of time before it goes to the dead-letter queue


@dataclass
class RecordArrival:
    settings: Settings
    reads: Reads  # DynamoDB: the run, shard and upload request an arrival needs
    shards: Shards  # DynamoDB: the shard counted, rejected or noted late
    runs: Runs  # DynamoDB: the run after the count (complete?)
    results: ResultsStore  # S3: the bundle's benchmark names and figures written under results/
    queue: FinalizeQueue  # SQS: finalize, once complete
    arrivals_queue: Queue | None  # SQS: an event deferred or failed, handed back (the finalizer, counting an overdue
    # bundle for a close, has none: its failure is the close's to say)
    attempts: RunAttempts  # the run's next attempt, for a bundle that came after the forward
    validation: BundleValidation  # S3: a bundle read, validated, and made ready to splice
    reports: Reports
    metrics: Metrics
    clock: Callable[[], float] = time.time

    def record(self, key: str, size: int | None = None, version_id: str | None = None) -> Arrival:
        """Validate and count one bundle that landed in the bucket; answers what happened.
        The object version validated is the one recorded, and the only one ever merged."""
        outcome = self._arrival(key, size, version_id)
        self.metrics.add(outcome.metric, 1, "Count")
        return outcome

    def defer(self, event: str, deferrals: int = 0) -> str:
        """An event this invocation has no time left for: sent again as a new message (a new
        message's receive count starts again: a bundle deferred for time never reaches the dead-letter
        queue unvalidated through it), counting its deferrals; past ``MAX_DEFERRALS`` it goes to the
        dead-letter queue, saying so (its alarm fires): no invocation had the time it needs."""
        if deferrals >= MAX_DEFERRALS:
            why = f"deferred {deferrals} times: no invocation of the arrivals function had the time its bundles need"
            self._queue().dead_letter(event, why)
            self.metrics.add("ArrivalsDeadLettered", 1, "Count")
            log.error("arrival dead-lettered: %s", why)
            return "dead_lettered"
        self._queue().send(event, deferrals + 1)
        self.metrics.add("ArrivalsDeferred", 1, "Count")
        return "deferred"

    def retry_later(self, receipt_handle: str, receive_count: int) -> None:
        """An event whose arrival failed comes back in minutes (``redelivery_delay``), not after the
        queue's visibility timeout."""
        self._queue().retry_in(receipt_handle, redelivery_delay(receive_count))

    def _queue(self) -> Queue:
        if self.arrivals_queue is None:
            raise RuntimeError("this function was built without the arrivals queue: see wiring._NEEDS")
        return self.arrivals_queue

    def _again(self, run: RunRecord) -> Arrival:
        """An arrival counted already (S3 delivers an event at least once, a close counts an overdue one
        itself, a dead letter is redriven): what its first delivery may have died before doing is done
        again, and nothing is read of its bundle, there or gone."""
        log.info("an arrival in run %s of %s counted already: nothing more to count", run.run_id, run.project)
        if self._completes(run):
            self.queue.request(run.project, run.run_id, "complete")
        self.reports.publish(run.project, run.run_id)
        return Arrival.DUPLICATE

    def _granted(self, key: str) -> tuple[ArrivalView, tuple[str, str, str, str]] | None:
        """What the ledger knows of the object's run, shard and grant, with the key's parts; None for
        an object no upload was granted for (it is ignored)."""
        try:
            parts = parse_bundle_key(key)
        except BadBundle as exc:
            log.warning("ignored object: %s", exc)
            return None
        view = self.reads.arrival_view(*parts)
        if view.run is None or view.upload is None:
            log.warning("ignored object %s: no upload was granted for it", key)
            return None
        return view, parts

    def _arrival(self, key: str, size: int | None, version_id: str | None) -> Arrival:
        granted = self._granted(key)
        if granted is None:
            return Arrival.IGNORED
        view, (project, run_id, shard, upload_id) = granted
        upload = view.upload
        assert view.run is not None and upload is not None, "a granted object's run and grant are read"
        if _seen(view.shard, upload):
            return self._again(view.run)  # absorbed before any download
        try:
            if size is not None:
                _check_size(size, upload, self.settings.tokenless_max_bundle_bytes)
            summary, version_id, normalized = self.validation.validated(
                key, version_id, upload.executor, not view.run.forward.sends_parts
            )
        except BadBundle as exc:
            return self._rejected(view.run, shard, upload_id, exc)
        except MissingObject:  # a dead letter redriven after the lifecycle took its bundle: said, never retried
            said = shown_as(shard, upload.label)  # as its readers know it
            log.warning("arrival of %s: its bundle is no longer in the bucket; shard %s noted without it", key, said)
            return self._rejected(view.run, shard, upload_id, BadBundle(GONE))
        figures = measured(summary.results)
        self.results.write(key, ShardResults(summary.benchmark_names, figures))
        cost_ms, longest_ms = shard_cost(figures) or (None, None)
        record = ShardRecord(
            name=shard,
            state=ARRIVED,
            upload_id=upload_id,
            key=key,
            size=size or upload.size,
            benchmarks=summary.benchmarks,
            pids=summary.pids,
            arrived_at=iso(self.clock()),
            label=upload.label,
            executor=upload.executor,
            gzipped=summary.gzipped,
            version_id=version_id,
            md5=upload.md5,
            normalized=normalized,
            group=upload.group,
            results_kept=True,
            cost_ms=cost_ms,
            longest_ms=longest_ms,
        )
        outcome = self._count(project, run_id, record, upload, view.shard)
        if outcome is not None:
            return outcome
        return self._late(view, record, upload)

    def _rejected(self, run: RunRecord, shard: str, upload_id: str, why: BadBundle) -> Arrival:
        if not self.shards.record_rejection(run.project, run.run_id, shard, upload_id, str(why)):
            return Arrival.DUPLICATE
        self.reports.publish(run.project, run.run_id)
        if run.close.requested:
            self.queue.request(run.project, run.run_id, "arrival")  # the close may wait for this one: it looks again
        return Arrival.REJECTED

    def _late(self, view: ArrivalView, record: ShardRecord, upload: GrantRecord) -> Arrival:
        """Granted before the run's close, in after it was finalized: never a yes and a drop. The
        bundle counts in the run's next attempt (forwarded again once complete), and shows late
        in this one; one of the ended attempt's own CI attempt opens none (only the CI's next attempt
        does): it shows late, kept, saying so."""
        run, now = existing(view.run, "the run of a late bundle"), self.clock()
        project, run_id = run.project, run.run_id
        origin = upload.origin
        try:
            following = self.attempts.current(
                RunRecord(
                    project=project,
                    run_id=base_run_id(run.run_id),
                    groups=dict(run.groups),
                    commit=run.commit,
                    head_commit=run.head_commit,
                    ref=run.ref,
                    base_ref=run.base_ref,
                    identity=run.identity,
                    created_at=iso(now),
                    deadline_at=int(now) + self.settings.run_deadline_seconds,
                    variants=run.variants,
                    ci_url=run.ci_url,
                    attempt=RunAttempt(ci=origin.attempt if origin and origin.run else None),
                ),
                late=True,
            )
        except AttemptEnded:
            reason = (
                f"arrived after the run was finalized, from its own CI attempt ({run.ci_attempt_said()}): kept, not "
                "counted; a re-run of its job counts in the CI's next attempt"
            )
            return self._noted_late(project, run_id, record, reason)
        self.shards.copy_upload_metadata(project, run_id, following.run_id, upload.upload_id)
        current = self.reads.arrival_view(project, following.run_id, record.name, upload.upload_id)
        if self._count(project, following.run_id, record, upload, current.shard) is None:
            raise Conflict(f"run {following.run_id} of {project} ended while a late bundle was counted in it: retried")
        reason = (
            f"arrived after the run was finalized: counted in attempt {following.attempt.number} ({following.run_id})"
        )
        return self._noted_late(project, run_id, record, reason)

    def _noted_late(self, project: str, run_id: str, record: ShardRecord, reason: str) -> Arrival:
        noted = self.shards.record_late(project, run_id, record, reason)
        self.reports.publish(project, run_id)
        return Arrival.LATE if noted else Arrival.DUPLICATE

    def _count(
        self,
        project: str,
        run_id: str,
        record: ShardRecord,
        upload: GrantRecord,
        shard: ShardRecord | None,
    ) -> Arrival | None:
        """Count a validated bundle in a run, once (``shard``: as read); publish; ask to finalize when
        it completed the run. None: the run takes no more shards."""
        if _seen(shard, upload):
            return Arrival.DUPLICATE
        outcome = self.shards.record_arrival(project, run_id, record, upload.requested_at, shard)
        while outcome is Counted.CHANGED:  # another upload of this shard was counted meanwhile: look again
            view = self.reads.arrival_view(project, run_id, record.name, upload.upload_id)
            if _seen(view.shard, upload):
                return Arrival.DUPLICATE
            outcome = self.shards.record_arrival(project, run_id, record, upload.requested_at, view.shard)
        if outcome is Counted.RUN_NOT_OPEN:
            return None
        run = existing(self.runs.run_record(project, run_id), f"run {run_id} of {project}")
        if (
            run.forward.sends_parts and run.state == OPEN
        ):  # its results upstream now: the send publishes it, this arrival with it
            self.queue.request(project, run_id, "shard", shard=record.name)
        else:
            self.reports.publish(project, run_id)
        if self._completes(run):
            self.queue.request(project, run_id, "complete")
        elif run.state == OPEN and run.close.requested:
            self.queue.request(project, run_id, "arrival")  # the close may wait for this one: it looks again
        return Arrival.RECORDED

    def _completes(self, run: RunRecord) -> bool:
        """The run is open and has all it waits for: every shard (a CI re-run's attempt: each
        re-run, not one the earlier attempt counted; else its close forwards it). A Buildkite build's
        first attempt never is (its steps after those seen are not known): its close (the gate, the
        deadline) ends it; a job retried after that completes its next attempt as a re-run does."""
        if run.state != OPEN or not run.complete() or (run.forward.by_executor and not run.attempt.rerun):
            return False
        if not run.attempt.rerun:
            return True
        # two more reads, in a next attempt complete by count only: what it counted, and what the one before had;
        # each of what changed since this process last read it (its report was just read: its head alone)
        snapshot = self.reads.changed_snapshot(run.project, run.run_id)
        earlier = attempt_run_id(base_run_id(run.run_id), run.attempt.number - 1)
        before = self.reads.changed_snapshot(run.project, earlier)
        counted_before = set(before.arrived()) if before else set()
        return not run.awaits_rerun(snapshot.arrived().values() if snapshot else (), counted_before)


def _check_size(size: int, upload: GrantRecord, tokenless_most: int) -> None:
    """A bundle of another size than its upload declared, or past what one without a token may be, is refused."""
    if upload.size is not None and size != upload.size:
        raise BadBundle(f"the bundle is {size} bytes but {upload.size} were declared")
    if upload.tokenless and size > tokenless_most:
        raise BadBundle(
            f"the bundle is {size} bytes, over the {tokenless_most} a shard "
            "sent without a token may be (the aggregator's TokenlessMaxBundleBytes)"
        )


def _seen(shard: ShardRecord | None, upload: GrantRecord) -> bool:
    """This upload was handled already, or a later one of the same shard was counted."""
    if shard is None:
        return False
    if upload.upload_id in (shard.upload_id, shard.noted_upload):
        return True
    return shard.requested_at is not None and shard.requested_at >= upload.requested_at
