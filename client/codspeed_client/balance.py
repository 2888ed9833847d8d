"""Shards balanced from recorded costs: pytest-split's durations file, and a longest-processing-
time-first split for frameworks with no splitter of their own."""

from __future__ import annotations

import heapq
from statistics import median

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any


def seconds_by_name(benchmarks: dict[str, dict[str, Any]], names: list[str] | None = None) -> dict[str, float]:
    """Each benchmark's cost in seconds (the aggregator's ``/v1/costs``), over ``names`` when given
    (else every benchmark recorded); one with no recorded cost gets the median of the others."""
    known = {n: b["seconds"] for n, b in benchmarks.items() if b.get("seconds") is not None}
    typical = median(known.values()) if known else 1.0
    return {name: known.get(name, typical) for name in (names if names is not None else benchmarks)}


def split(costs: dict[str, float], shards: int) -> list[list[str]]:
    """``shards`` groups of benchmarks, the most costly placed first, each on the least loaded
    shard (ties: the lower shard; equal costs: by name), so a run is as long as its longest shard."""
    loads = [(0.0, index) for index in range(shards)]
    groups: list[list[str]] = [[] for _ in range(shards)]
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        load, index = heapq.heappop(loads)
        groups[index].append(name)
        heapq.heappush(loads, (load + costs[name], index))
    return groups
