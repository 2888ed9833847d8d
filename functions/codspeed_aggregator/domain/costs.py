"""What each benchmark costs to run, in seconds, from what its shard's arrival recorded: a
walltime benchmark's measured total time; a valgrind one's instructions at one documented rate
(callgrind runs a benchmark once, at about ``VALGRIND_INSTRUCTIONS_PER_SECOND``), relative
seconds, which is what balancing shards needs."""

from typing import Any

from .results import Figures

# callgrind's pace, the runner's options, pytest-codspeed's warm-up included: fitted at 35, 41 and 63 M a
# second in three runs on one core here (python bench/valgrind_rate.py), about 50 times slower than native
VALGRIND_INSTRUCTIONS_PER_SECOND = 40e6


def cost_seconds(result: Figures) -> float | None:
    """A benchmark's cost in seconds, or None when its figures say none (a walltime result
    recorded before its total time was)."""
    if result.get("unit") == "cycles" and result.get("instructions") is not None:
        return float(result["instructions"]) / VALGRIND_INSTRUCTIONS_PER_SECOND
    if result.get("unit") == "ns" and result.get("total_s") is not None:
        return float(result["total_s"])
    return None


def shard_cost(results: dict[str, Figures]) -> tuple[int, int] | None:
    """What a shard's benchmarks cost to run in all, and its costliest one's, in milliseconds;
    None when no figure says (walltime results recorded before total times were)."""
    seconds = [s for s in map(cost_seconds, results.values()) if s is not None]
    return (round(sum(seconds) * 1000), round(max(seconds) * 1000)) if seconds else None


def run_costs(results_by_shard: dict[str, dict[str, Figures]]) -> dict[str, dict[str, Any]]:
    """Each benchmark's cost and shard, by name, over a run's shards' results (a benchmark in two
    shards is the later shard's, by name)."""
    costs = {}
    for shard in sorted(results_by_shard):
        for name, result in results_by_shard[shard].items():
            costs[name] = {"seconds": cost_seconds(result), "shard": shard}
    return costs
