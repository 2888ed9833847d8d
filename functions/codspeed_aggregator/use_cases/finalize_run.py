"""Finalize a run: claim it once, plan its uploads (run parts) with the shards carried from the
baseline, forward each part (``forward_part``), and record how it ended."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.bundle_store import BundleStore
from ..adapters.queues import FinalizeQueue
from ..adapters.ledger import Baselines, Parts, Reads, Runs
from ..adapters.metrics import Metrics
from ..adapters.upstream_http import UpstreamError
from ..domain.baseline import Completion, branch_of, complete
from ..domain.keys import run_bundles_prefix
from ..domain.retries import retry_delay
from ..domain.ledger import CLOSED_EMPTY, FORWARD_FAILED, FORWARDED, RunRecord, ShardRecord, Snapshot
from ..domain.timestamps import epoch, iso
from ..domain.uploads import Upload, plan_forward
from ..settings import Settings
from .forward_part import ForwardPart
from .reports import Reports


@dataclass(frozen=True)
class ForwardPlan:
    run: RunRecord
    shards: dict[str, ShardRecord]  # arrived and carried, by name
    completion: Completion
    baseline_run: str | None
    base_metadata: dict | None
    uploads: list[Upload]


@dataclass
class FinalizeRun:
    settings: Settings
    reads: Reads  # DynamoDB: the run, and its baseline's shards
    runs: Runs  # DynamoDB: the claim, the plan, how it ended
    parts: Parts  # DynamoDB: each part's claim and the upstream's answer
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run, read and recorded
    store: BundleStore  # S3: the run's bundles tagged final once forwarded
    queue: FinalizeQueue  # SQS: one message per other part; a failed message's retry
    forwarder: ForwardPart
    reports: Reports
    metrics: Metrics
    clock: Callable[[], float] = time.time

    def finalize(self, project: str, run_id: str, part: int | None = None) -> str:
        """Merge and forward a run, once; answers the run's state afterwards (or "not_claimed").

        Skipped shards are carried from the baseline run when it has them. Over CodSpeed's
        benchmark limit, or the bytes one merge may take, the run goes as several uploads (run
        parts): the first finalizer (``part`` None) plans them, forwards the first and queues one
        message per other part, so parts merge in parallel, each in an invocation of its own.
        Each part that reached the upstream is recorded, so a retry sends only the rest; whoever
        records the last one finishes the run."""
        now, lease = int(self.clock()), self.settings.finalize_lease_seconds
        if part is None:
            claimed = self.runs.claim_finalize(project, run_id, now, lease)
        else:
            claimed = self.parts.claim_part(project, run_id, part, now, lease)
        if not claimed:
            return "not_claimed"
        if part is None:
            self.reports.publish(project, run_id)  # the report says "finalizing" while it is
        try:
            return self._finalize_claimed(project, run_id) if part is None else self._finalize_part(project, run_id, part)
        except Exception as exc:  # whatever it was, the attempt ends with its reason, and SQS retries it
            message = str(exc) if isinstance(exc, UpstreamError) else f"finalizing failed: {type(exc).__name__}: {exc}"
            self.runs.finish(project, run_id, FORWARD_FAILED, error=message,
                             upstream={"run_id": None, "status": "failed", "at": iso(self.clock()), "message": message})
            if part is not None:
                self.parts.release_part(project, run_id, part)
            self.metrics.add("ForwardFailed", 1, "Count")
            self.reports.publish(project, run_id)
            raise

    def retry_later(self, receipt_handle: str, receive_count: int) -> None:
        """A finalize message that failed comes back in minutes (``retry_delay``), not after the
        queue's visibility timeout."""
        self.queue.retry_in(receipt_handle, retry_delay(receive_count))

    def _finalize_claimed(self, project: str, run_id: str) -> str:
        snapshot = self.reads.snapshot(project, run_id, with_names=True)
        if not snapshot.arrived():
            self.runs.finish(project, run_id, CLOSED_EMPTY)
            self.store.mark_final(run_bundles_prefix(project, run_id))
            self.reports.publish(project, run_id)
            return CLOSED_EMPTY
        if snapshot.run.plan is not None:  # a retry: the parts already sent were planned with this baseline
            plan = self._plan(snapshot, snapshot.run.plan["baseline"])
        else:
            branch = branch_of(snapshot.run.base_ref) or self.settings.default_branch
            plan = self._plan(snapshot, self.baselines.latest_baseline(project, branch))
            self.runs.record_plan(project, run_id, {"baseline": plan.baseline_run, "parts": len(plan.uploads)})
        todo = [i for i in range(len(plan.uploads)) if str(i) not in snapshot.run.forwarded_parts]
        for index in todo[1:]:
            self.queue.request(project, run_id, "part", part=index)
        if todo:
            self._forward_part(plan, project, run_id, todo[0], snapshot.run.announced_parts.get(str(todo[0])))
        return self._finish_when_forwarded(plan, project, run_id)

    def _finalize_part(self, project: str, run_id: str, index: int) -> str:
        snapshot = self.reads.snapshot(project, run_id, with_names=True)
        plan = self._plan(snapshot, snapshot.run.plan["baseline"])
        if str(index) not in snapshot.run.forwarded_parts:
            self._forward_part(plan, project, run_id, index, snapshot.run.announced_parts.get(str(index)))
        return self._finish_when_forwarded(plan, project, run_id)

    def _plan(self, snapshot: Snapshot, baseline_run: str | None) -> ForwardPlan:
        """What a run forwards, the same for every finalizer of it: its arrived shards, the
        ones carried from the baseline run chosen when it was claimed, in uploads."""
        run = snapshot.run
        arrived = {s.name: s for s in sorted(snapshot.arrived().values(), key=lambda s: s.name)}
        branch = branch_of(run.base_ref) or self.settings.default_branch
        baseline = self.reads.snapshot(run.project, baseline_run, with_names=True) if baseline_run else None
        completion = complete(run, arrived, branch, baseline)
        shards = dict(sorted({**arrived, **completion.carried}.items()))
        return ForwardPlan(
            run=run, shards=shards, completion=completion, baseline_run=baseline_run,
            base_metadata=self.forwarder.sent_metadata(run.project, run.run_id, next(iter(arrived.values()))),
            uploads=plan_forward(shards, self.settings.max_benchmarks_per_upload, self.settings.max_part_bytes),
        )

    def _forward_part(self, plan: ForwardPlan, project: str, run_id: str, index: int, announced: dict | None) -> None:
        upload, parts = plan.uploads[index], len(plan.uploads)
        carried = {n: plan.completion.outcome["carried"][n] for n in upload.shards if n in plan.completion.carried}
        try:
            answer = self.forwarder.forward([plan.shards[n] for n in upload.shards], upload.merged, project, run_id,
                                            plan.base_metadata, carried, index, parts, announced)
        except UpstreamError as exc:
            if parts > 1:
                raise UpstreamError(f"upload {index + 1} of {parts}: {exc}") from exc
            raise
        self.parts.record_forwarded_part(project, run_id, index, answer)

    def _finish_when_forwarded(self, plan: ForwardPlan, project: str, run_id: str) -> str:
        now = self.reads.snapshot(project, run_id).run
        answers = now.forwarded_parts
        if len(answers) < len(plan.uploads):
            return now.state  # the finalizer of the last part to reach the upstream finishes the run
        parts = [answers[str(i)] for i in range(len(plan.uploads))]
        size = sum(p["size"] for p in parts)
        message = f"{len(plan.shards)} shards merged, {size} bytes" + (f", in {len(parts)} uploads" if len(parts) > 1 else "")
        finished = self.clock()
        if not self.runs.finish(project, run_id, FORWARDED, outcome=plan.completion.outcome, upstream={
            "run_id": ",".join(p["run_id"] for p in parts), "status": "success", "at": iso(finished), "message": message,
        }):
            return FORWARDED  # the finalizer of another part finished it first
        self.metrics.add("ForwardSucceeded", 1, "Count")
        self.metrics.add("MergedBytes", size, "Bytes")
        self.metrics.add("FinalizeLatency", finished - epoch(plan.run.created_at), "Seconds")
        if own_branch := branch_of(plan.run.ref):
            self.baselines.record_baseline(project, own_branch, run_id, plan.run.commit, finished)
            self.reports.baseline_moved(project, own_branch, run_id, finished)  # this process knows it at once
        self.store.mark_final(run_bundles_prefix(project, run_id))
        self.reports.publish(project, run_id)
        return FORWARDED
