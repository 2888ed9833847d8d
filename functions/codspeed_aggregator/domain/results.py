"""Per-benchmark results: what an arrival keeps of a shard's profiles, and how a shard's
benchmarks compare with its baseline run's.

A valgrind benchmark's figure is its estimated cycles, weighing cache misses as valgrind's
documentation suggests (an L1 miss costs about 10 cycles, a last-level miss up to 200):
``Ir + 10 x (I1mr + D1mr + D1mw) + 100 x (ILmr + DLmr + DLmw)``. A walltime benchmark's is its
mean time per round.

A report never lists every benchmark: each shard is summed up once (``summarize``: counts and
its worst changes), and the run's summary adds those up (``merged``), so a report stays small and
cheap whatever the run's size; a shard's page lists all of its benchmarks (``shard_entries``)."""

import heapq
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Required, TypedDict

from codspeed_rules.results import RawFigures
from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry

L1_WEIGHT, LL_WEIGHT = 10, 100
REGRESSION, IMPROVEMENT = "regression", "improvement"
LISTED = 50  # regressions and improvements a summary names, the worst of each: a shard's page has them all


class Figures(TypedDict, total=False):
    """A benchmark's figures as the ledger keeps them (``measured``): its value in its unit (cycles, or
    a walltime mean in ns), and what it was made of."""

    unit: Required[str]
    value: Required[float]
    instructions: int  # cycles: callgrind's Ir (a count), and its cache misses weighted into the value
    l1_misses: int
    ll_misses: int
    stdev_ns: float | None  # ns: pytest-codspeed's walltime stats
    total_s: float  # what the benchmark took to run, in all (``_walltime_cost``)


@dataclass(frozen=True)
class ShardResults:
    """Every benchmark a shard's bundle holds (its names, in order) and the figures of each
    (``measured``), as the arrival that counted it stored them."""

    names: list[str]
    results: dict[str, Figures]

    def to_json(self) -> bytes:
        return json.dumps({"names": self.names, "results": self.results}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "ShardResults":
        document = json.loads(data)
        return cls(list(document.get("names") or []), dict(document.get("results") or {}))


def measured(raw: dict[str, RawFigures]) -> dict[str, Figures]:
    """A bundle's results (``BundleSummary.results``) in the form the ledger keeps."""
    kept: dict[str, Figures] = {}
    for name, r in raw.items():
        if "Ir" in r:
            l1 = r.get("I1mr", 0) + r.get("D1mr", 0) + r.get("D1mw", 0)
            ll = r.get("ILmr", 0) + r.get("DLmr", 0) + r.get("DLmw", 0)
            kept[name] = {
                "unit": "cycles",
                "value": r["Ir"] + L1_WEIGHT * l1 + LL_WEIGHT * ll,
                "instructions": int(r["Ir"]),  # counts: callgrind writes integers
                "l1_misses": int(l1),
                "ll_misses": int(ll),
            }
        elif "mean_ns" in r:
            kept[name] = {"unit": "ns", "value": r["mean_ns"], "stdev_ns": r.get("stdev_ns")}
            if "total_time" in r:
                kept[name]["total_s"] = _walltime_cost(r)
    return kept


def _walltime_cost(stats: RawFigures) -> float:
    """What a walltime benchmark took to run, in seconds, as pytest-codspeed runs one: a call for
    its result, the warm-up, then the measured rounds (``total_time``). The warm-up calls until
    ``warmup_time_ns`` has passed, so it ends past that budget by at most one call: its calls
    times the rounds' mean (exact for steady calls), held within those bounds (a warm-up call may
    be many times faster or slower than the rounds'). Results that do not say the budget have
    only the count."""
    call = stats["mean_ns"] / 1e9
    if "warmup_time_ns" in stats:
        budget = stats["warmup_time_ns"] / 1e9
        warmup = min(max(stats.get("warmup_iters", 1) * call, budget), budget + call)
    else:
        warmup = stats.get("warmup_iters", 0) * call
    return float(stats["total_time"] + call + warmup)


def change(result: Figures, base: Figures | None) -> float | None:
    """(value - baseline) / baseline, when both are figures of one unit; a walltime figure is
    never compared with a cycles one."""
    if base is None or base.get("unit") != result.get("unit") or not base.get("value") or result.get("value") is None:
        return None
    return float((result["value"] - base["value"]) / base["value"])


def flag(delta: float | None, threshold: float) -> str | None:
    if delta is None or abs(delta) <= threshold:
        return None
    return REGRESSION if delta > 0 else IMPROVEMENT


def _entry(shard: str, name: str, result: Figures, base: Figures | None, threshold: float) -> BenchmarkEntry:
    delta = change(result, base)
    return BenchmarkEntry(
        name=name,
        shard=shard,
        state="measured",
        unit=result["unit"],
        value=result["value"],
        instructions=result.get("instructions"),
        l1_misses=result.get("l1_misses"),
        ll_misses=result.get("ll_misses"),
        stdev_ns=result.get("stdev_ns"),  # what it cost to run (total_s) is the durations', not the report's
        baseline=base["value"] if base is not None and delta is not None else None,
        change=delta,
        flag=flag(delta, threshold),
    )


def _change(entry: BenchmarkEntry) -> float:
    """A flagged entry's change (a flag is given only with one)."""
    return entry.change or 0.0


def ranked(entries: Iterable[BenchmarkEntry]) -> list[BenchmarkEntry]:
    """Regressions first, the largest first; then the rest by shard and name; improvements last,
    the largest first."""

    def key(e: BenchmarkEntry) -> tuple[int, float, str, str]:
        if e.flag == REGRESSION:
            return (0, -_change(e), e.shard, e.name)
        if e.flag == IMPROVEMENT:
            return (2, _change(e), e.shard, e.name)
        return (1, 0.0, e.shard, e.name)

    return sorted(entries, key=key)


def shard_entries(
    shard: str, results: dict[str, Figures], before: Mapping[str, Figures], threshold: float
) -> list[BenchmarkEntry]:
    """Every measured benchmark of a shard, compared with its figure in the baseline (``before``:
    name -> its figures there), ranked."""
    return ranked(_entry(shard, name, result, before.get(name), threshold) for name, result in results.items())


def absent_entries(shard: str, baseline: dict[str, Figures], state: str, source: str | None) -> list[BenchmarkEntry]:
    """The baseline's benchmarks of a shard that has none in this run: ``carried`` (their figures
    stand for this run's), ``running`` (the shard is not in yet) or ``missing``."""
    carried = state == "carried"
    return [
        BenchmarkEntry(
            name=name,
            shard=shard,
            state=state,
            unit=r.get("unit"),
            value=r.get("value") if carried else None,
            baseline=r.get("value"),
            instructions=r.get("instructions") if carried else None,
            source=source,
        )
        for name, r in sorted(baseline.items())
    ]


@dataclass
class ShardSummary:
    """What a report keeps of one shard's benchmarks: how many of each kind, and the worst
    ``LISTED`` changes each way."""

    counts: Counter[str] = field(default_factory=Counter)  # measured, regressions, improvements, unchanged, new
    regressions: list[BenchmarkEntry] = field(default_factory=list)
    improvements: list[BenchmarkEntry] = field(default_factory=list)


def summarize(shard: str, results: dict[str, Figures], before: Mapping[str, Figures], threshold: float) -> ShardSummary:
    """A shard's summary, in one pass over its results: a model is made only for the changes it names."""
    counts: Counter[str] = Counter()
    worse: list[tuple[float, str]] = []
    better: list[tuple[float, str]] = []
    for name, result in results.items():
        delta = change(result, before.get(name))
        kind = flag(delta, threshold)
        counts["measured"] += 1
        counts[counted_as(delta, threshold)] += 1
        if delta is not None and kind == REGRESSION:
            worse.append((delta, name))
        elif delta is not None and kind == IMPROVEMENT:
            better.append((delta, name))

    def make(picked: list[tuple[float, str]]) -> list[BenchmarkEntry]:
        return [_entry(shard, n, results[n], before.get(n), threshold) for _, n in picked]

    worst = heapq.nsmallest(LISTED, worse, key=lambda c: (-c[0], c[1]))
    return ShardSummary(counts, make(worst), make(heapq.nsmallest(LISTED, better)))


def counted_as(delta: float | None, threshold: float) -> str:
    """The count a benchmark's change goes to."""
    if delta is None:
        return "new"
    return {REGRESSION: "regressions", IMPROVEMENT: "improvements", None: "unchanged"}[flag(delta, threshold)]


@dataclass(frozen=True)
class Twin:
    """A benchmark measured by several shards of one executor: each shard's change (None: new)."""

    benchmark: str
    changes: dict[str, float | None]  # by shard

    @property
    def worst(self) -> str:
        """The shard whose change is the worst (the largest; a new one's the least)."""
        return max(self.changes, key=lambda s: (self.changes[s] is not None, self.changes[s] or 0.0, s))


def counted_once(summary: ShardSummary, twins: Iterable[Twin], threshold: float) -> ShardSummary:
    """``summary`` with each of ``twins`` counted once, at its worst change, where the shards'
    summaries merged counted it in each shard that measured it; the changes it names keep that
    one entry of it, naming every shard that measured it."""
    counts = Counter(summary.counts)
    kept: dict[tuple[str, str], list[str]] = {}  # (benchmark, its worst shard) -> every shard of it
    measured_by: dict[tuple[str, str], str] = {}  # (benchmark, shard) -> its worst shard
    for twin in twins:
        if len(twin.changes) < 2:
            continue
        worst = twin.worst
        kept[(twin.benchmark, worst)] = sorted(twin.changes)
        for shard, delta in twin.changes.items():
            measured_by[(twin.benchmark, shard)] = worst
            if shard != worst:
                counts["measured"] -= 1
                counts[counted_as(delta, threshold)] -= 1

    def once(entries: list[BenchmarkEntry]) -> list[BenchmarkEntry]:
        return [
            e.model_copy(update={"shards": kept[(e.name, e.shard)]}) if (e.name, e.shard) in kept else e
            for e in entries
            if measured_by.get((e.name, e.shard), e.shard) == e.shard
        ]

    return ShardSummary(counts, once(summary.regressions), once(summary.improvements))


def merged(summaries: Iterable[ShardSummary]) -> ShardSummary:
    """Summaries as one: their counts added, and the worst ``LISTED`` changes each way of them all.
    A merged summary merges again with others into what its parts would have."""
    total: Counter[str] = Counter()
    worse: list[BenchmarkEntry] = []
    better: list[BenchmarkEntry] = []
    for summary in summaries:
        total.update(summary.counts)
        worse += summary.regressions
        better += summary.improvements
    return ShardSummary(
        total,
        heapq.nsmallest(LISTED, worse, key=lambda e: (-_change(e), e.shard, e.name)),
        heapq.nsmallest(LISTED, better, key=lambda e: (_change(e), e.shard, e.name)),
    )


def combine(
    summary: ShardSummary, carried: int = 0, running: int = 0, missing: int = 0
) -> tuple[BenchmarkCounts, list[BenchmarkEntry]]:
    """A run's counts and the changes its report names (the worst ``LISTED`` each way, regressions
    first), from its shards' summaries merged."""
    total, worse, better = summary.counts, summary.regressions, summary.improvements
    counts = BenchmarkCounts(
        **{k: total[k] for k in ("measured", "regressions", "improvements", "unchanged", "new")},
        carried=carried,
        running=running,
        missing=missing,
        worst_regression=worse[0].change if worse else None,
        worst_improvement=better[0].change if better else None,
    )
    return counts, worse + better


@dataclass(frozen=True)
class SummaryDigest:
    """What a published report summed up: the bundles whose results it counted, against which
    baseline run and threshold, merged into one summary. A process that has not read the run
    yet starts from it and reads the results of only the bundles it does not cover: one object
    instead of every shard's."""

    bundles: frozenset[str]
    against: str | None
    threshold: float
    summary: ShardSummary

    def covers(self, bundles: set[str], against: str | None, threshold: float) -> bool:
        """It stands for part of a run whose counted bundles are ``bundles``: a bundle it counted
        and the run no longer does (its shard uploaded again) would be counted twice."""
        return self.against == against and self.threshold == threshold and self.bundles <= bundles

    def to_json(self) -> bytes:
        def entries(listed: list[BenchmarkEntry]) -> list[dict[str, Any]]:
            return [e.model_dump(exclude_none=True) for e in listed]

        return json.dumps(
            {
                "bundles": sorted(self.bundles),
                "against": self.against,
                "threshold": self.threshold,
                "counts": dict(self.summary.counts),
                "regressions": entries(self.summary.regressions),
                "improvements": entries(self.summary.improvements),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "SummaryDigest":
        d = json.loads(data)
        summary = ShardSummary(
            Counter(d["counts"]),
            [BenchmarkEntry(**e) for e in d["regressions"]],
            [BenchmarkEntry(**e) for e in d["improvements"]],
        )
        return cls(frozenset(d["bundles"]), d["against"], d["threshold"], summary)
