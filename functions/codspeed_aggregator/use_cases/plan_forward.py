"""What a run forwards: planned once by its claiming finalizer (the shards it sends, those it
carries from the baseline, each part's runPartId, what an earlier attempt already sent), written to
S3, and read back the same by every finalizer of the run, each part's its own slice."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..adapters.bucket import Bucket, MissingObject
from ..adapters.ledger import Baselines, Reads, Sources
from ..adapters.results_store import ResultsStore
from ..domain.attempts import attempt_run_id, base_run_id
from ..domain.baseline import BUNDLE_EXPIRED, LOOKBACK, Completion, branch_of, complete, skipped_keys
from ..domain.forward_plan import ForwardPlan, PartPlan
from ..domain.keys import part_plan_key
from ..domain.overlaps import overlaps
from ..domain.plan_record import PlanRecord
from ..domain.records import RunRecord, ShardRecord, Snapshot, sent_as
from ..domain.run_plan import RunPlan
from ..domain.timestamps import epoch
from ..domain.upstream_parts import UpstreamPart, empty_part_id, part_id, plan_build, plan_forward
from ..settings import Settings
from .forward_part import ForwardPart
from .merge_bases import MergeBases


@dataclass
class PlanForward:
    settings: Settings
    reads: Reads  # DynamoDB: the run's and its baseline's shards, an earlier attempt's plan
    baselines: Baselines  # DynamoDB: the branch's baseline, and its runs before it
    sources: Sources  # DynamoDB: the copies the branch's runs keep of shards they carried
    store: Bucket  # S3: plans (plans/) read
    results: ResultsStore  # S3: the benchmark names of the run's and its baseline's shards, read once
    forwarder: ForwardPart  # the metadata the run's parts go under
    clock: Callable[[], float] = time.time
    merge_bases: MergeBases = field(default_factory=lambda: MergeBases(None))  # GitHub: a pull request's, untold

    def new(self, snapshot: Snapshot) -> RunPlan:
        """What this attempt forwards, decided once by its claiming finalizer. The run's earlier
        attempt's parts are kept (the upstream holds them); only parts it does not hold as they
        are now are sent: a shard re-run, a group that came late, a part that failed."""
        run = snapshot.run
        earlier, held = earlier_plan(self.reads, self.store, run)
        if run.forward.by_executor:  # a build's uploads replace each other by executor, not by part: each goes again
            held = {}
        snapshot, baseline = self._baseline(snapshot, earlier)
        kept = earlier.uploads if earlier else []
        shards, completion = self._shards(snapshot, baseline, lost=True)
        uploads = self._uploads(run, shards, completion, kept)
        held |= {UpstreamPart((n,), merged=False).key: as_sent for n, as_sent in _sent_as_they_came(snapshot).items()}
        ids = [part_id(upload, shards) for upload in uploads]
        first = snapshot.first_arrived()
        return RunPlan(
            baseline=baseline,
            uploads=uploads,
            ids=ids,
            held=held,
            todo=[i for i, u in enumerate(uploads) if held.get(u.key) != ids[i]],
            outcome=completion.outcome,
            shards=shards,
            carried=sorted(completion.carried),
            first=first.name if first else None,
        )

    def _uploads(
        self, run: RunRecord, shards: dict[str, ShardRecord], completion: Completion, kept: list[UpstreamPart]
    ) -> list[UpstreamPart]:
        """What goes upstream. In the parts mode a skipped shard is left to CodSpeed, which fills a run's
        absent benchmarks from its baseline and marks them skipped: nothing measured on another commit
        goes up as this one's (a run that measured nothing still sends one empty part: CodSpeed gets the
        commit's run). In one-upload a carried shard goes in the upload (named in its metadata's
        carriedShards) while the bucket holds its bundle: one the lifecycle expired (a parts run's, kept
        two days) is left to CodSpeed as in the parts mode, and said, never a run failed for it."""
        left_out = set(completion.carried) if run.forward.sends_parts else self._expired(completion)
        sent = {n: s for n, s in shards.items() if n not in left_out}
        settings = self.settings
        if run.forward.by_executor:
            return plan_build(sent, settings.max_benchmarks_per_upload, settings.max_part_bytes)
        uploads = plan_forward(
            sent, settings.max_benchmarks_per_upload, settings.max_part_bytes, kept, merge=not run.forward.sends_parts
        )
        if run.forward.sends_parts and not uploads and completion.carried:
            return [UpstreamPart((), merged=True, run_part_id=empty_part_id())]
        return uploads

    def _baseline(self, snapshot: Snapshot, earlier: RunPlan | None) -> tuple[Snapshot, str | None]:
        """The run its skipped shards are carried from: the earlier attempt's (what it carried stays
        carried from the same run), else its base branch's at its base commit, GitHub asked for that
        commit where the upload could not tell it (the snapshot's run then names it)."""
        if earlier is not None:
            return snapshot, earlier.baseline
        run = self.merge_bases.resolved(snapshot.run)
        branch = branch_of(run.base_ref) or self.settings.default_branch
        return replace(snapshot, run=run), self.baselines.baseline_for(run.project, branch, run.base_commits())

    def _expired(self, completion: Completion) -> set[str]:
        """The carried shards whose bundle the bucket no longer holds (one LIST each, once a run),
        each noted on its outcome's entry so the report says why it is not in the upload."""
        gone = {n for n, s in completion.carried.items() if not self.store.holds(s.bundle_key)}
        carried = completion.outcome.carried
        expired = {n: replace(c, left_out=BUNDLE_EXPIRED) for n, c in carried.items() if n in gone}
        completion.outcome = replace(completion.outcome, carried={**carried, **expired})
        return gone

    def _shards(
        self, snapshot: Snapshot, baseline_run: str | None, lost: bool = False
    ) -> tuple[dict[str, ShardRecord], Completion]:
        """A run's arrived shards and those carried from its baseline run, by name; with ``lost``,
        the benchmarks of the baseline the run lost are looked for (in every shard's results:
        once, by the claiming finalizer, whose plan keeps what it found for the parts)."""
        run = snapshot.run
        arrived = {s.name: s for s in sorted(snapshot.arrived().values(), key=lambda s: s.name)}
        branch = branch_of(run.base_ref) or self.settings.default_branch
        baseline = self.reads.snapshot(run.project, baseline_run) if baseline_run else None
        names = self._benchmark_names(arrived, baseline) if lost else None
        kept_since = (
            self.clock() - (self.settings.retention_days - 1) * 86400
        )  # a day's margin: the forward must find it
        earlier = self._received_before(run, arrived, branch, baseline, kept_since)
        completion = complete(run, arrived, branch, baseline, names, earlier)
        if names is not None:
            twice, total = overlaps(arrived, names)
            completion.outcome = replace(completion.outcome, overlaps=twice, overlaps_total=total)
        return dict(sorted({**arrived, **completion.carried}.items())), completion

    def _benchmark_names(self, arrived: dict[str, ShardRecord], baseline: Snapshot | None) -> dict[str, list[str]]:
        """The benchmark names of each bundle of the run and its baseline, by key: read once, to tell both
        the benchmarks the run lost and those it measured twice."""
        read = (*arrived.values(), *(baseline.arrived().values() if baseline else ()))
        found = self.results.read_many(s.bundle_key for s in read if s.results_kept)
        return {key: results.names for key, results in found.items() if results}

    def _received_before(
        self, run: RunRecord, arrived: dict[str, Any], branch: str, baseline: Snapshot | None, kept_since: float
    ) -> dict[str, tuple[RunRecord, ShardRecord]]:
        """Where each skipped shard the baseline run did not receive was last received: a copy the
        baseline run keeps of it (``keep_sources``), else the branch's runs before it, the latest first
        (``LOOKBACK`` of them at most), received (or kept) since ``kept_since``: the bucket still keeps
        that bundle. A source names the run the shard was measured in, wherever its copy is."""
        if baseline is None:
            return {}
        wanted = {n for n in skipped_keys(run, baseline) if n not in arrived and n not in baseline.arrived()}
        found: dict[str, tuple[RunRecord, ShardRecord]] = {}

        def take(shards: dict[str, tuple[RunRecord, ShardRecord, float]]) -> None:
            found.update(
                {
                    name: (source, shard)
                    for name, (source, shard, at) in shards.items()
                    if name in wanted and name not in found and at > kept_since
                }
            )

        def kept(run_id: str) -> dict[str, tuple[RunRecord, ShardRecord, float]]:
            return {
                name: (k.source(run.project), k.shard, k.kept_at)
                for name, k in self.sources.kept(run.project, run_id).items()
            }

        if wanted:
            take(kept(baseline.run.run_id))
        for earlier_id in (
            self.baselines.earlier_runs(run.project, branch, baseline.run.run_id, LOOKBACK)
            if wanted - set(found)
            else ()
        ):
            take(self._received_in(run.project, earlier_id))
            take(kept(earlier_id))
            if not wanted - set(found):
                break
        return found

    def _received_in(self, project: str, run_id: str) -> dict[str, tuple[RunRecord, ShardRecord, float]]:
        """The shards a run received, each with when it arrived (none: the run expired)."""
        earlier = self.reads.snapshot(project, run_id)
        if earlier is None:
            return {}
        return {name: (earlier.run, s, epoch(s.arrived_at)) for name, s in earlier.arrived().items() if s.arrived_at}

    def of(self, run: RunRecord, recorded: PlanRecord, written: RunPlan | None = None) -> ForwardPlan:
        """What a run forwards, the same for every finalizer of it: the plan its claiming
        finalizer wrote (``written``, when it is this one), with the shards it names as they were counted."""
        whole = written or self.store.read_plan(run.project, run.run_id, recorded.version)
        shards = whole.shards
        completion = Completion({name: shards[name] for name in whole.carried}, whole.outcome)
        first = shards[whole.first] if whole.first else None
        return ForwardPlan(
            run=run,
            shards=shards,
            completion=completion,
            baseline_run=whole.baseline,
            base_metadata=self.forwarder.sent_metadata(run.project, run.run_id, first)
            if first
            else self.forwarder.opened_metadata(run.project, run.run_id),  # every shard carried: the run's own
            uploads=whole.uploads,
            part_ids=whole.ids,
            todo=whole.todo,
        )

    def part(self, run: RunRecord, recorded: PlanRecord, index: int) -> PartPlan:
        """What one part's finalizer forwards: its slice of the plan (written when several send; one
        that sends alone reads the plan whole)."""
        if recorded.parts_at is not None:
            return PartPlan.from_item(
                self.store.read_json(part_plan_key(run.project, run.run_id, recorded.parts_at, index))
            )
        return self.of(run, recorded).part(index)


def earlier_plan(reads: Reads, store: Bucket, run: RunRecord) -> tuple[RunPlan | None, dict[str, str]]:
    """The plan of the run's latest earlier attempt that made one, and what the upstream holds
    after it: each part's key and what it held when it got there."""
    for attempt in range(run.attempt.number - 1, 0, -1):
        earlier_id = attempt_run_id(base_run_id(run.run_id), attempt)
        earlier = reads.snapshot(run.project, earlier_id)
        recorded = earlier.run.forward.plan if earlier else None
        if earlier and recorded and recorded.written:
            try:
                plan = store.read_plan(run.project, earlier_id, recorded.version)
            except MissingObject:  # expired with the earlier attempt's bundles: planned afresh (same ids)
                return None, {}
            held = dict(plan.held)
            for index in earlier.run.forwarded_parts:
                held[plan.uploads[int(index)].key] = plan.ids[int(index)]
            return plan, held
    return None, {}


def _sent_as_they_came(snapshot: Snapshot) -> dict[str, str]:
    """The shards a parts run sent as they landed, each with what it held."""
    return {name: as_sent for name, s in snapshot.arrived().items() if (as_sent := sent_as(s))}
