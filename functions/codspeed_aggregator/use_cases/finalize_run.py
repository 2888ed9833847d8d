"""Finalize a run: claim it once, plan its uploads (run parts) with the shards carried from the
baseline, forward each part (``forward_part``), and record how it ended."""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from botocore.exceptions import ClientError

from codspeed_rules.backoff import backoff
from codspeed_wire.report import UpstreamEntry

from ..adapters.bucket import Bucket
from ..adapters.ledger import Baselines, Parts, Reads, Runs
from ..adapters.metrics import Metrics
from ..adapters.queues import FinalizeQueue
from ..adapters.upstream_http import UpstreamError
from ..aws_faults import transient
from ..domain.baseline import branch_of
from ..domain.errors import existing
from ..domain.forward_plan import ForwardPlan, PartPlan
from ..domain.keys import part_plan_key, run_bundles_prefix, upstream_runs_key
from ..domain.outcome import Outcome
from ..domain.part_answers import Announced, Delivered
from ..domain.plan_record import PlanRecord
from ..domain.records import CLOSED_EMPTY, FORWARD_FAILED, FORWARDED, OPEN, RunRecord, sent_as
from ..domain.retries import redelivery_delay
from ..domain.timestamps import epoch, iso
from ..services.close_barrier import CloseBarrier
from ..settings import Settings
from .forward_part import ForwardPart
from .keep_sources import KeepSources
from .plan_forward import PlanForward
from .reports import Reports

WRITE_TRIES = 5
RUN_HASHES = 20  # a tokenless run's merged uploads' Run Hashes its record keeps (64 characters each)


@dataclass
class FinalizeRun:
    settings: Settings
    reads: Reads  # DynamoDB: the run, and its baseline's shards
    runs: Runs  # DynamoDB: the claim, the plan, how it ended
    parts: Parts  # DynamoDB: each part's claim and the upstream's answer
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run, recorded
    store: Bucket  # S3: the plan written (plans/); the run's bundles tagged final once forwarded
    queue: FinalizeQueue  # SQS: one message per part of a run in several; a failed message's retry
    planner: PlanForward  # what the run forwards: planned once, read by every finalizer of it
    forwarder: ForwardPart
    reports: Reports
    metrics: Metrics
    barrier: CloseBarrier  # what a close still waits for (``domain.barrier``)
    clock: Callable[[], float] = time.time
    keeper: KeepSources | None = None  # a branch's run keeps what it carried, as a source of the branch's later runs

    def finalize(self, project: str, run_id: str, part: int | None = None) -> str:
        """Merge and forward a run, once; answers the run's state afterwards (or "not_claimed").

        Skipped shards are carried from the baseline run when it has them. Over CodSpeed's
        benchmark limit, or the bytes one merge may take, the run goes as several uploads (run
        parts): the first finalizer (``part`` None) plans them and queues one message per part, so
        parts merge in parallel, each in an invocation of its own, and each is retried alone.
        Every part is forwarded under a claim of its own (keyed by its runPartId), so no part is
        ever sent by two finalizers at once, nor beside a parts run's send of it; each part that reached the
        upstream is recorded, so a
        retry sends only the rest; whoever records the last one finishes the run."""
        if part is None:
            grants = self.barrier.passed(project, run_id)
            if grants is None:
                return "waiting"
            lease = self.settings.finalize_lease_seconds
            if not self.runs.claim_finalize(project, run_id, int(self.clock()), lease, grants=grants):
                return self._not_claimed(project, run_id, grants)
            self.reports.publish(project, run_id)  # the report says "finalizing" while it is
            return self._failing_with_reason(project, run_id, lambda: self._finalize_claimed(project, run_id))
        run = self.reads.run_with_parts(project, run_id)  # a part reads no shard item: its plan has its own
        if run is None or run.forward.plan is None:
            return "not_claimed"
        own = self.planner.part(run, run.forward.plan, part)
        if not self._claim(project, run_id, own.claim):
            return "not_claimed"

        def forward() -> str:
            if str(part) not in run.forwarded_parts:
                self._forward_part(own, project, run_id, run.announced_parts.get(str(part)), run.forward.sends_parts)
            return self._finish_when_forwarded(project, run_id)

        return self._failing_with_reason(project, run_id, forward)

    def _not_claimed(self, project: str, run_id: str, grants: int) -> str:
        """A claim refused: another finalizer holds the run, or an upload was granted since the barrier
        was passed (its count moved), which the barrier now waits for, or the run ended owing what comes
        after its end (a fault after it was written forwarded): done now."""
        run = self.runs.run_record(project, run_id)
        if run is not None and run.state == OPEN and run.grants != grants:
            self.queue.request_in(project, run_id, "barrier", 1)
            return "waiting"
        if run is not None and run.forward.owed:
            return self._settle(project, run_id)
        return "not_claimed"

    def retry_later(self, receipt_handle: str, receive_count: int) -> None:
        """A finalize message that failed comes back in minutes (``redelivery_delay``), not after the
        queue's visibility timeout."""
        self.queue.retry_in(receipt_handle, redelivery_delay(receive_count))

    def _failing_with_reason(self, project: str, run_id: str, work: Callable[[], str]) -> str:
        """Whatever fails, the attempt ends with its reason and SQS retries it; a run of several
        parts keeps its lease (a part may still be at work), and a run every part of which reached
        the upstream is never marked failed."""
        try:
            return work()
        except Exception as exc:
            message = str(exc) if isinstance(exc, UpstreamError) else f"finalizing failed: {type(exc).__name__}: {exc}"
            now = self._run(project, run_id)
            sends = now.forward.plan.sends if now.forward.plan else 1
            if now.forward.plan and len(now.forwarded_parts) >= sends:
                raise  # forwarded in full: only the ledger's last write failed, and the retry makes it
            upstream = UpstreamEntry(status="failed", at=iso(self.clock()), message=message)
            if sends > 1:
                self.runs.fail_held(project, run_id, upstream, message)
            else:
                self.runs.finish(project, run_id, FORWARD_FAILED, error=message, upstream=upstream)
            self.metrics.add("ForwardFailed", 1, "Count")
            self.reports.publish(project, run_id)
            raise

    def _written(self, write: Callable[[], bool], tries: int = WRITE_TRIES) -> bool:
        """A ledger write retried while DynamoDB fails it (throttled, or a server error: ``aws_faults``),
        so that a run whose every part reached the upstream ends forwarded, not failed; any other fault
        (an access denied) is raised at once."""
        for attempt in range(tries - 1):
            try:
                return write()
            except ClientError as exc:
                if not transient(exc):
                    raise
                self.runs.sleep(backoff(attempt, 0.1, 2.0, jitter=False))
        return write()  # the last try: its failure is raised

    def _claim(self, project: str, run_id: str, claim: str) -> bool:
        return self.parts.claim_part(project, run_id, claim, int(self.clock()), self.settings.finalize_lease_seconds)

    def _finalize_claimed(self, project: str, run_id: str) -> str:
        snapshot = existing(self.reads.snapshot(project, run_id), f"run {run_id} of {project}")
        if not snapshot.arrived() and not (snapshot.run.skipped and self.forwarder.opened_metadata(project, run_id)):
            return self._closed_empty(
                project, run_id
            )  # nothing came, and nothing can be carried under a run of its own
        recorded = snapshot.run.forward.plan  # a retry's: the parts already sent were planned with it
        if recorded is None or not recorded.written or self._outlived(snapshot.run, recorded):
            whole = self.planner.new(snapshot)
            if not whole.uploads:  # every shard skipped, and no run of the branch has any of them
                return self._closed_empty(project, run_id, whole.outcome)
            recorded = PlanRecord(baseline=whole.baseline, parts=len(whole.uploads), sends=len(whole.todo))
            plan = self.planner.of(snapshot.run, recorded, whole)
            if len(plan.todo) > 1:  # what each part's finalizer reads: its slice, written before the plan is recorded
                parts_at = uuid.uuid4().hex[:16]
                recorded = replace(recorded, parts_at=parts_at)
                self.store.put_json_many(
                    {part_plan_key(project, run_id, parts_at, i): plan.part(i).to_item() for i in plan.todo}
                )
            recorded = replace(recorded, version=self.store.put_plan(project, run_id, whole))
            self.runs.record_plan(project, run_id, recorded)
        else:
            plan = self.planner.of(snapshot.run, recorded)
        todo = [i for i in plan.todo if str(i) not in snapshot.run.forwarded_parts]
        if len(plan.todo) > 1:  # each part on a message of its own: merged in parallel, retried alone
            for index in todo:
                self.queue.request(project, run_id, "part", part=index)
        elif todo and self._claim(project, run_id, (own := plan.part(todo[0])).claim):
            self._forward_part(
                own, project, run_id, snapshot.run.announced_parts.get(str(todo[0])), snapshot.run.forward.sends_parts
            )
        return self._finish_when_forwarded(project, run_id, plan)

    def _outlived(self, run: RunRecord, recorded: PlanRecord) -> bool:
        """A recorded plan none of whose parts reached the upstream, one of whose carried bundles the
        lifecycle took while the forward waited (CodSpeed down for days): planned again, that shard
        left to CodSpeed's baseline and said, never failed for it. A part already upstream keeps its plan."""
        if run.forwarded_parts or run.forward.sends_parts:  # a parts run never sends a carried shard's bundle
            return False
        carried = self.planner.of(run, recorded).completion.carried.values()
        return any(not self.store.holds(shard.bundle_key) for shard in carried)

    def _closed_empty(self, project: str, run_id: str, outcome: Outcome | None = None) -> str:
        self.runs.finish(project, run_id, CLOSED_EMPTY, outcome=outcome)
        return self._settle(project, run_id)

    def _forward_part(
        self, part: PartPlan, project: str, run_id: str, announced: Announced | None, sends_parts: bool
    ) -> None:
        """Forward one upload whose claim this finalizer holds; a failure lets its retry take it at once.
        A shard a parts run sent while this was planned is not sent again."""
        if sends_parts and not part.upload.merged:
            shard = self.reads.shard_view(project, run_id, part.upload.shards[0])[1]  # None: a carried shard
            if shard is not None and shard.upstream is not None and sent_as(shard) == part.part_id:
                self.parts.record_forwarded_part(project, run_id, part.index, shard.upstream.answer())
                return
        try:
            if part.upload.merged:
                answer = self.forwarder.send_merged(part, project, run_id, announced)
            else:
                shard = part.shards[part.upload.shards[0]]
                answer = self.forwarder.send_as_sent(shard, project, run_id, part.base_metadata, part.index, announced)
        except Exception as exc:
            self.parts.release_part(project, run_id, part.claim)
            if part.sends > 1 and isinstance(exc, UpstreamError):
                raise UpstreamError(f"upload {part.index + 1} of {part.sends}: {exc}") from exc
            raise
        self.parts.record_forwarded_part(project, run_id, part.index, answer)

    def _finish_when_forwarded(self, project: str, run_id: str, plan: ForwardPlan | None = None) -> str:
        """Finish the run once every upload it sends reached the upstream; the plan is read whole
        (once a run) only then, by a part's finalizer that does not have it."""
        now = self._run(project, run_id)
        answers = now.forwarded_parts
        recorded = now.forward.plan
        if recorded is None or len(answers) < recorded.sends:
            return now.state  # the finalizer of the last part to reach the upstream finishes the run
        plan = plan or self.planner.of(now, recorded)
        parts = [answers[str(i)] for i in plan.todo]
        finished = self.clock()
        upstream = self._upstream_said(plan, parts, finished)
        if not self._written(
            lambda: self.runs.finish(project, run_id, FORWARDED, outcome=plan.completion.outcome, upstream=upstream)
        ):
            return FORWARDED  # the finalizer of another part finished it first, and owes what follows
        self.metrics.add("ForwardSucceeded", 1, "Count")
        self.metrics.add("MergedBytes", sum(p.size for p in parts), "Bytes")
        self.metrics.add("FinalizeLatency", finished - epoch(plan.run.created_at), "Seconds")
        return self._settle(project, run_id, (plan, finished))

    def _settle(self, project: str, run_id: str, ended: tuple[ForwardPlan, float] | None = None) -> str:
        """What a run owes once it is written forwarded (or closed empty), recorded as owed in that same
        write (``Runs.finish``): its branch's records (its forwarded run, the carried sources, the
        baseline), its bundles tagged, its final report (with the comment and the status). Done by this
        finalizer, else by whoever comes next (the message retried, a redrive): each step again is a
        no-op, and nothing goes upstream again. The run owes nothing once they all succeeded. ``ended``:
        the forward's plan and the moment it finished, from the finalizer that wrote it (no read again)."""
        if ended is None:  # a retry's, or a run closed empty: the run as its end wrote it
            now = self._run(project, run_id)
            if now.state == FORWARDED:
                plan = self.planner.of(now, existing(now.forward.plan, f"the plan of run {run_id} of {project}"))
                ended = plan, epoch(now.forward.upstream.at) if now.forward.upstream else self.clock()
        if ended is not None:
            plan, finished = ended
            self._record_on_its_branch(plan, finished)
            sent = (
                frozenset(s.key for s in plan.shards.values() if s.key) if plan.run.forward.sends_parts else frozenset()
            )
            self.store.mark_final(run_bundles_prefix(project, run_id), sent_as_they_came=sent)
        else:
            self.store.mark_final(run_bundles_prefix(project, run_id))
        self.reports.publish(project, run_id)
        self._written(lambda: self.runs.settle(project, run_id))
        return FORWARDED if ended is not None else CLOSED_EMPTY

    def _upstream_said(self, plan: ForwardPlan, parts: list[Delivered], finished: float) -> UpstreamEntry:
        """How the forward ended, as the run says it; past the upstream run ids its item lists, the
        whole list goes beside the plan."""
        message, runs = plan.outcome_said(parts)
        if runs.overflow:
            self.store.put_json(upstream_runs_key(plan.run.project, plan.run.run_id), {"run_ids": runs.distinct})
        hashes = [p.run_hash for p in parts if p.run_hash][:RUN_HASHES]  # a tokenless run's, to find it by
        return UpstreamEntry(**runs.said(), status="success", at=iso(finished), message=message, run_hashes=hashes)

    def _record_on_its_branch(self, plan: ForwardPlan, finished: float) -> None:
        """A forwarded run of a branch (a token's) is what its benchmarks cost; whole, it is the branch's
        baseline, the shards it carried kept beside it (before its bundles are tagged final)."""
        project, run_id = plan.run.project, plan.run.run_id
        own_branch = None if plan.run.tokenless else branch_of(plan.run.ref)
        if not own_branch:  # a pull request's, a tag's, or a ref naming no branch (refs/heads/)
            return
        self.baselines.record_forwarded(project, own_branch, run_id, finished)  # whole or not
        if (expected := plan.run.expected_count()) is not None and len(plan.shards) < expected:
            return  # shards missing: no baseline
        if self.keeper and plan.completion.carried:
            carried = plan.completion.outcome.carried
            self.keeper.keep(
                project, run_id, plan.completion.carried, carried, results_only=plan.run.forward.sends_parts
            )
        self.baselines.record_baseline(project, own_branch, run_id, plan.run.commit, finished)
        self.reports.baseline_moved(project, own_branch, run_id, plan.run.commit, finished)  # known here at once

    def _run(self, project: str, run_id: str) -> RunRecord:
        """The run's record and its parts' answers, of a run this finalizer claimed (so there is one)."""
        return existing(self.reads.run_with_parts(project, run_id), f"run {run_id} of {project}")
