"""A run's shards summed up for its report: each arrived shard's benchmarks against the baseline's,
merged into one summary, at the cost of what changed since the process's last report of the run.

A shard's summary is made once per process and baseline (its bundle's results never change), and
the run's merged summary is kept as a digest of the bundles it covers: a rebuild after a batch
merges that with the batch's shards only. A process new to a big run starts from the digest the
last published report left beside it (one object, not one per shard)."""

import threading
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codspeed_wire.report import Overlap

from ..adapters.results_store import ResultsStore
from ..domain.baseline import result_sources
from ..domain.records import Snapshot
from ..domain.results import Figures, ShardSummary, SummaryDigest, Twin, change, merged, summarize

CACHED_SUMMARIES = 20_000  # shard summaries a process keeps (a few KB each)
CACHED_DIGESTS = 32  # runs whose merged summary a process keeps
CACHED_WHOLE_BASELINES = 4  # baselines read whole (benchmarks moved between shards), by name
DIGEST_WORTH = 16  # results one rebuild reads itself (one round of GETs) before it reads the run's digest instead


@dataclass
class ShardSummaries:
    results: ResultsStore  # S3: results/, each shard's benchmarks; the runs' digests
    threshold: float
    # (bundle, baseline run, threshold) -> its summary
    _summaries: dict[tuple[str, str | None, float], ShardSummary] = field(default_factory=dict, init=False, repr=False)
    _digests: dict[tuple[str, str], SummaryDigest] = field(default_factory=dict, init=False, repr=False)
    # (project, run) -> every figure of the run, by benchmark
    _whole_baselines: dict[tuple[str, str], dict[str, Figures]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def summed(self, snapshot: Snapshot, baseline: Snapshot | None) -> SummaryDigest:
        """The run's arrived shards summed up against ``baseline``, as a digest of their bundles."""
        against, threshold = (baseline.run.run_id if baseline else None), self.threshold
        bundles = {name: s.key for name, s in snapshot.arrived().items() if s.results_kept and s.key}
        seed = self._seed(snapshot, set(bundles.values()), against)
        uncovered = {name: key for name, key in bundles.items() if seed is None or key not in seed.bundles}
        known, todo = self._known(uncovered, against)
        made = {(bundles[name], against, threshold): s for name, s in self._summarized(todo, baseline).items()}
        parts = [*known, *made.values()]
        digest = SummaryDigest(
            frozenset(bundles.values()), against, threshold, merged([*([seed.summary] if seed else []), *parts])
        )
        self._remember((snapshot.run.project, snapshot.run.run_id), made, digest)
        return digest

    def _known(self, bundles: dict[str, str], against: str | None) -> tuple[list[ShardSummary], dict[str, str]]:
        """Of ``bundles`` (name: its bundle's key), the summaries this process holds against
        ``against``, and the bundles it must summarize still."""
        with self._lock:
            held = {name: self._summaries.get((key, against, self.threshold)) for name, key in bundles.items()}
        return [s for s in held.values() if s is not None], {n: bundles[n] for n, s in held.items() if s is None}

    def _remember(
        self, run: tuple[str, str], made: dict[tuple[str, str | None, float], ShardSummary], digest: SummaryDigest
    ) -> None:
        """The summaries just made and the run's digest, kept for the process's next report of it."""
        with self._lock:
            self._summaries.update(made)
            trim_oldest(self._summaries, CACHED_SUMMARIES)
            self._digests.pop(run, None)  # the newest last
            self._digests[run] = digest
            trim_oldest(self._digests, CACHED_DIGESTS)

    def twins(self, snapshot: Snapshot, baseline: Snapshot | None, overlaps: Sequence[Overlap]) -> list[Twin]:
        """The change each shard of an overlap measured (``overlaps``: the run's outcome's, told at
        its close), read from the results of those shards only."""
        arrived = snapshot.arrived()
        named = {s: arrived[s].key or "" for o in overlaps for s in o.shards if s in arrived and arrived[s].key}
        read = self._read(dict(sorted(named.items())), baseline)
        return [Twin(o.benchmark, _changes(o, read)) for o in overlaps]

    def _summarized(self, bundles: dict[str, str], baseline: Snapshot | None) -> dict[str, ShardSummary]:
        """The summaries of the shards of ``bundles`` (name: its bundle's key)."""
        return {name: summarize(name, *read, self.threshold) for name, read in self._read(bundles, baseline).items()}

    def _read(
        self, bundles: dict[str, str], baseline: Snapshot | None
    ) -> dict[str, tuple[dict[str, Any], Mapping[str, Figures]]]:
        """Each shard's figures (``bundles``: name, its bundle's key) and the baseline's of its
        benchmarks, its results read with the baseline's of the same shards, in parallel: ``before``
        finds those read."""
        sources = result_sources(baseline) if baseline and bundles else {}
        found = self.results.read_many([*bundles.values(), *(sources[n][0] for n in bundles if n in sources)])
        read = {}
        for name, key in bundles.items():
            results = found.get(key)
            figures = results.results if results else {}
            read[name] = (figures, self.before(baseline, sources, name, figures))
        return read

    def published(self, project: str, run_id: str, digest: SummaryDigest) -> None:
        """A report made of ``digest`` was published: left beside it for processes new to the run,
        when it spares them more than one round of reads."""
        if len(digest.bundles) > DIGEST_WORTH:
            self.results.write_digest(project, run_id, digest)

    def _seed(self, snapshot: Snapshot, bundles: set[str], against: str | None) -> SummaryDigest | None:
        """A digest that covers part of the run as it is now: this process's last, or the last
        published when that one spares reading more than ``DIGEST_WORTH`` shards' results (a
        process publishes one batch in several: the others published the rest)."""
        key = (snapshot.run.project, snapshot.run.run_id)
        with self._lock:
            held = self._digests.get(key)
            best = held if held is not None and held.covers(bundles, against, self.threshold) else None
            covered = best.bundles if best else frozenset()
            uncached = sum(b not in covered and (b, against, self.threshold) not in self._summaries for b in bundles)
        if uncached <= DIGEST_WORTH:
            return best
        found = self.results.read_digest(*key)
        if found is None or not found.covers(bundles, against, self.threshold) or len(found.bundles) <= len(covered):
            return best
        return found

    def before(
        self, baseline: Snapshot | None, sources: dict[str, Any], shard: str, figures: dict[str, Any]
    ) -> Mapping[str, Figures]:
        """The baseline's figures of a shard's benchmarks (``sources``: where the baseline's results
        are): those of its shard of the same name, and for a benchmark not there (moved to another
        shard since), the baseline's whole set."""
        if baseline is None:
            return {}
        same = self.results.read(sources[shard][0]) if shard in sources else None
        before = same.results if same else {}
        if len(sources) <= (shard in sources) or all(name in before for name in figures):
            return before  # every one found in its own shard, or nowhere else to look
        return ChainMap(before, self._whole_baseline(baseline, sources))

    def _whole_baseline(self, baseline: Snapshot, sources: dict[str, Any]) -> dict[str, Any]:
        """Every figure of the baseline's shards, read once a process (its latest few kept)."""
        key = (baseline.run.project, baseline.run.run_id)
        with self._lock:
            whole = self._whole_baselines.get(key)
        if whole is None:
            whole = {}
            for found in self.results.read_many(k for k, _ in sources.values()).values():
                whole.update(found.results if found else {})
            with self._lock:
                self._whole_baselines[key] = whole
                trim_oldest(self._whole_baselines, CACHED_WHOLE_BASELINES)
        return whole


def trim_oldest(cache: dict[Any, Any], limit: int) -> None:
    """Let go of the oldest entries of a process's cache beyond ``limit``."""
    while len(cache) > limit:
        cache.pop(next(iter(cache)))


def _changes(
    overlap: Overlap, read: dict[str, tuple[dict[str, Any], Mapping[str, Figures]]]
) -> dict[str, float | None]:
    """The change each shard of ``overlap`` measured of its benchmark (None: new there)."""
    benchmark = overlap.benchmark
    return {
        shard: change(read[shard][0][benchmark], read[shard][1].get(benchmark))
        for shard in overlap.shards
        if shard in read and benchmark in read[shard][0]
    }
