"""The run report: the stable contract read by the client, webhooks and CI summaries."""

from typing import Any

from codspeed_rules.names import Shown

from .model import WireModel

FINAL_STATES = ("forwarded", "forward_failed", "closed_empty")


class ShardEntry(WireModel):
    name: str
    label: str | None = None  # what the uploader called it (a CodSpeed runner's runPartId), when not its name
    display: str | None = None  # a readable form of the label: "bench [shard 1, job 1/3]"
    executor: str | None = None
    state: str
    attempt: int = 0  # its uploads counted in this attempt of the run (a re-push is its second)
    size: int | None = None
    benchmarks: int | None = None
    reason: str | None = None
    arrived_at: str | None = None
    source: dict[str, Any] | None = None  # for a carried shard: the run and commit its results come from
    cost_s: float | None = None  # what its benchmarks cost to run, recorded at arrival (seconds: see /v1/costs)
    longest_s: float | None = None  # its costliest benchmark's
    upstream: bool = False  # a parts run's shard: its results went upstream as it was counted
    upstream_run_id: str | None = None  # the upstream's run its part went to (its answer's runId)
    upload_id: str | None = None  # the upload counted for it (a grant's ``upload_id``): a re-push follows its own
    run_hash: str | None = None  # a tokenless part's CodSpeed Run Hash: the sha256 of the bytes CodSpeed received

    @property
    def shown(self) -> Shown:
        """What a reader is shown it as: its readable label, else its label, else its name (a pushed
        shard's, which is what its job pushed it as)."""
        return Shown(self.display or self.label or self.name)


class BenchmarkEntry(WireModel):
    """One benchmark's result in a run. ``value`` is the figure compared with the baseline: the
    estimated cycles of a valgrind benchmark (instructions + 10 x L1 misses + 100 x LL misses),
    or a walltime benchmark's mean time."""

    name: str
    shard: str
    state: str  # measured (in a shard of this run), carried (from the baseline), missing
    unit: str | None = None  # "cycles" or "ns"
    value: float | None = None
    instructions: int | None = None
    l1_misses: int | None = None
    ll_misses: int | None = None
    stdev_ns: float | None = None
    baseline: float | None = None
    change: float | None = None  # (value - baseline) / baseline
    flag: str | None = None  # "regression" or "improvement": the change is past the report's threshold
    source: str | None = None  # for a carried or missing one: the run its value comes from
    # a benchmark measured by several shards of one executor (an overlap): each that measured it;
    # counted once, at its worst change, which this entry is
    shards: list[str] = []


class BenchmarkCounts(WireModel):
    """How many of a run's benchmarks are of each kind: the summary a report keeps whatever the
    run's size (the benchmarks themselves are on each shard's page)."""

    measured: int = 0  # in a shard of this run
    regressions: int = 0  # measured, past the threshold against the baseline
    improvements: int = 0
    unchanged: int = 0  # measured and compared, within the threshold
    new: int = 0  # measured, with nothing to compare with
    carried: int = 0  # of the baseline's skipped shards, carried forward
    running: int = 0  # in the baseline, in a shard of this run that is not in yet
    missing: int = 0  # in the baseline, not in this run, and no skipped shard explains it
    worst_regression: float | None = None  # the largest change of a regression
    worst_improvement: float | None = None  # the largest (most negative) change of an improvement


class ShardBenchmarks(WireModel):
    """One shard's page of a run's results: every benchmark of it, compared with the baseline."""

    project: str
    run_id: str
    shard: str
    state: str  # the shard's, as in the report
    baseline: dict[str, Any] | None = None  # the run compared with: run_id, commit
    threshold: float = 0.05
    benchmarks: list[BenchmarkEntry] = []  # regressions first, the largest first; improvements last


class UpstreamEntry(WireModel):
    # the upstream runs the run's parts went under, comma-joined: all of them, up to 20 within 2 KiB;
    # past that the first, ``run_ids`` counting them all (the whole list is in the bucket beside the plan)
    run_id: str | None = None
    run_ids: int | None = None
    status: str
    at: str
    message: str | None = None
    # a tokenless run's merged uploads: each one's CodSpeed Run Hash (the sha256 of the POST's bytes CodSpeed
    # received), what the runner prints for a fork's upload, to find the run by; 20 at most (2 KiB)
    run_hashes: list[str] = []


class Overlap(WireModel):
    """A benchmark measured in more than one shard of a run by one executor."""

    benchmark: str
    executor: str
    shards: list[str]  # the first 5 that hold it
    in_shards: int  # how many hold it


class Report(WireModel):
    project: str
    run_id: str
    attempt: int = 1  # a run forwarded and then uploaded to again goes on as attempt 2, run id "<run>~2"
    commit: str | None = None  # what was benchmarked, as CodSpeed's runner says it (a pull request's merge commit)
    head_commit: str | None = None  # the pull request's head, where ``commit`` is its merge commit: what people see
    ref: str | None = None
    opened_at: str | None = None  # when the run's first upload was granted
    ci_url: str | None = None  # the CI run's page, when the CI says where it is
    state: str
    partial: bool
    # an open run a close was taken for: what it still waits for and until when at the latest
    closing: str | None = None
    version: int
    expected: int | None = None
    arrived: int  # shards measured in this run
    carried: int = 0  # shards skipped and carried from the baseline: done, with the arrived ones
    shards: list[ShardEntry]
    upstream: UpstreamEntry | None = None
    baseline: dict[str, Any] | None = None  # the run compared with and carried from: run_id, commit, branch, why
    missing_benchmarks: list[str] = []  # in the baseline, gone here, and no skipped shard explains it (the first 200)
    # benchmarks measured twice (two shards, one executor), told at the run's close: the first listed, how many
    overlaps: list[Overlap] = []
    overlaps_total: int = 0
    counts: BenchmarkCounts = BenchmarkCounts()
    # The changes past the threshold, the worst first: at most 50 regressions, then at most 50
    # improvements (``counts`` has how many there are). Every benchmark is on its shard's page:
    # GET /v1/runs/{project}/{run_id}/benchmarks?shard=NAME (ShardBenchmarks).
    benchmarks: list[BenchmarkEntry] = []
    threshold: float = 0.05  # a change past it (either way) is flagged
    page_url: str | None = None  # the run's page: a signed link that needs no token
    codspeed_url: str | None = None  # the project's runs on CodSpeed, when they are forwarded there
    generated_at: str

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def shown_in(self, state: str) -> list[Shown]:
        """The shards in ``state``, as their readers know them."""
        return [s.shown for s in self.shards if s.state == state]

    def shards_shown(self, benchmark: BenchmarkEntry) -> list[Shown]:
        """The shards a benchmark stands in (each that measured it), by the names their readers know them
        (``ShardEntry.shown``: a runner job as its CI shows it), never by their storage keys."""
        shown = {s.name: s.shown for s in self.shards}
        # a shard the report does not list (the baseline's alone): its key is all there is to say
        return [shown.get(name, Shown(name)) for name in benchmark.shards or [benchmark.shard]]
