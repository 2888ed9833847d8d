"""The run report as JSON, as ``codspeed-client`` reads it: ``codspeed_wire.report``'s models (the one
definition, pydantic's) in types the light client can name, its required keys in a base of their own
(``typing.Required`` is Python 3.11's; the client runs on 3.10). Read for types only (the client imports it
under ``TYPE_CHECKING``); tests/unit/test_wire.py holds each to its model's fields, required and not."""

from typing import Any, TypedDict


class _ShardJsonRequired(TypedDict):
    name: str
    state: str


class ShardJson(_ShardJsonRequired, total=False):
    label: str | None
    display: str | None
    executor: str | None
    attempt: int
    size: int | None
    benchmarks: int | None
    reason: str | None
    arrived_at: str | None
    source: dict[str, Any] | None
    cost_s: float | None
    longest_s: float | None
    upstream: bool
    upstream_run_id: str | None
    upload_id: str | None
    run_hash: str | None


class _BenchmarkJsonRequired(TypedDict):
    name: str
    shard: str
    state: str


class BenchmarkJson(_BenchmarkJsonRequired, total=False):
    unit: str | None
    value: float | None
    instructions: int | None
    l1_misses: int | None
    ll_misses: int | None
    stdev_ns: float | None
    baseline: float | None
    change: float | None
    flag: str | None
    source: str | None
    shards: list[str]


class CountsJson(TypedDict, total=False):
    measured: int
    regressions: int
    improvements: int
    unchanged: int
    new: int
    carried: int
    running: int
    missing: int
    worst_regression: float | None
    worst_improvement: float | None


class _UpstreamJsonRequired(TypedDict):
    status: str
    at: str


class UpstreamJson(_UpstreamJsonRequired, total=False):
    run_id: str | None
    run_ids: int | None
    message: str | None
    run_hashes: list[str]


class OverlapJson(TypedDict):
    benchmark: str
    executor: str
    shards: list[str]
    in_shards: int


class _ReportJsonRequired(TypedDict):
    project: str
    run_id: str
    state: str
    partial: bool
    version: int
    arrived: int
    shards: list[ShardJson]
    generated_at: str


class ReportJson(_ReportJsonRequired, total=False):
    attempt: int
    commit: str | None
    head_commit: str | None
    ref: str | None
    opened_at: str | None
    ci_url: str | None
    closing: str | None
    expected: int | None
    carried: int
    upstream: UpstreamJson | None
    baseline: dict[str, Any] | None
    missing_benchmarks: list[str]
    overlaps: list[OverlapJson]
    overlaps_total: int
    counts: CountsJson
    benchmarks: list[BenchmarkJson]
    threshold: float
    page_url: str | None
    codspeed_url: str | None


class _ShardBenchmarksJsonRequired(TypedDict):
    project: str
    run_id: str
    shard: str
    state: str


class ShardBenchmarksJson(_ShardBenchmarksJsonRequired, total=False):
    baseline: dict[str, Any] | None
    threshold: float
    benchmarks: list[BenchmarkJson]
