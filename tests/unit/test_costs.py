"""What a benchmark costs, from what its shard's arrival recorded, and shards balanced on it."""

import pytest

from codspeed_aggregator.domain.costs import VALGRIND_INSTRUCTIONS_PER_SECOND, cost_seconds, run_costs, shard_cost
from codspeed_aggregator.domain.results import measured
from codspeed_client.balance import seconds_by_name, split


def test_a_benchmarks_cost_is_its_walltime_total_or_its_instructions_at_callgrinds_pace():
    walltime = measured(
        {
            "w": {
                "mean_ns": 8466.141849500687,
                "stdev_ns": 470.6,
                "median_ns": 8427.4,
                "rounds": 2993,
                "total_time": 2.977257264,
                "warmup_iters": 115071,
            }
        }
    )["w"]  # as a real run wrote them
    assert cost_seconds(walltime) == pytest.approx(3.951473)  # said no warm-up time: its 115071 calls and one more
    timed = measured(
        {
            "w": {
                "mean_ns": 8466.141849500687,
                "total_time": 2.977257264,
                "warmup_iters": 115071,
                "warmup_time_ns": 1_000_000_000,
            }
        }
    )["w"]
    assert cost_seconds(timed) == pytest.approx(2.977257264 + 8466e-9 + 1.0, abs=1e-6)  # the warm-up ran its second

    valgrind = measured({"v": {"Ir": 40_000_000, "I1mr": 10, "D1mr": 5, "D1mw": 1}})["v"]
    assert cost_seconds(valgrind) == 40_000_000 / VALGRIND_INSTRUCTIONS_PER_SECOND == 1.0
    assert cost_seconds(measured({"old": {"mean_ns": 10.0}})["old"]) is None  # recorded before total times were
    assert run_costs({"2": {"x": valgrind}, "1": {"x": walltime, "y": walltime}}) == {
        "x": {"seconds": 1.0, "shard": "2"},
        "y": {"seconds": cost_seconds(walltime), "shard": "1"},
    }


def test_a_slow_benchmarks_warm_up_is_its_time_budget_not_its_calls_at_the_rounds_mean():
    """pytest-codspeed warms up for warmup_time_ns (1 s): 41 quick first calls, then one slow round
    of 0.47 s. Counted as 42 calls of the round's mean it was 20.2 s; pytest's --durations said 1.3 to
    2.2 s. The budget and at most one call more: 2.41 s (the first call counted at the round's mean)."""
    slow = measured(
        {"s": {"mean_ns": 0.47e9, "total_time": 0.47, "rounds": 1, "warmup_iters": 41, "warmup_time_ns": 1_000_000_000}}
    )["s"]
    assert cost_seconds(slow) == pytest.approx(0.47 + 0.47 + 1.0 + 0.47)
    long = measured(
        {"l": {"mean_ns": 3e9, "total_time": 3.0, "rounds": 1, "warmup_iters": 1, "warmup_time_ns": 1_000_000_000}}
    )["l"]
    assert cost_seconds(long) == pytest.approx(3.0 + 3.0 + 3.0)  # one warm-up call, longer than the budget


def test_a_steady_benchmarks_warm_up_is_its_calls_past_the_budget():
    """As pytest-codspeed 5.0.4 recorded a 150 ms sleep (warm-up 0.2 s, 3 rounds): two warm-up calls,
    0.3 s; its test took 0.93 s in pytest's --durations. The budget alone said 0.80 s."""
    steady = measured(
        {
            "s": {
                "mean_ns": 0.150_3e9,
                "total_time": 0.451,
                "rounds": 3,
                "warmup_iters": 2,
                "warmup_time_ns": 200_000_000,
            }
        }
    )["s"]
    assert cost_seconds(steady) == pytest.approx(0.451 + 0.1503 + 2 * 0.1503)
    assert 0.88 <= cost_seconds(steady) <= 0.93


def test_shards_are_balanced_longest_first_onto_the_least_loaded():
    costs = {"a": 7, "b": 5, "c": 4, "d": 3, "e": 3, "f": 2}
    assert split(costs, 2) == [["a", "d", "f"], ["b", "c", "e"]]  # 12 and 12
    assert split(costs, 1) == [["a", "b", "c", "d", "e", "f"]]
    assert split({"a": 1}, 3) == [["a"], [], []]
    assert split({"y": 2, "x": 2, "z": 2}, 2) == [["x", "z"], ["y"]]  # equal costs: by name, whatever the order given


@pytest.mark.parametrize(
    "names, expected",
    [
        (None, {"a": 4.0, "b": 1.0, "c": 2.5}),  # c recorded no time: the median of the others
        (["a", "new"], {"a": 4.0, "new": 2.5}),  # a benchmark never recorded: the median too
    ],
)
def test_a_benchmark_with_no_recorded_cost_gets_the_median(names, expected):
    recorded = {
        "a": {"seconds": 4.0, "shard": "1"},
        "b": {"seconds": 1.0, "shard": "1"},
        "c": {"seconds": None, "shard": "2"},
    }
    assert seconds_by_name(recorded, names) == expected
    assert seconds_by_name({}, ["x"]) == {"x": 1.0}


def test_a_shards_cost_is_its_benchmarks_in_all_and_its_costliest_ones_in_milliseconds():
    figures = measured({"a": {"Ir": 80_000_000}, "b": {"Ir": 20_000_000}, "old": {"mean_ns": 10.0}})
    assert shard_cost(figures) == (2500, 2000)  # 2 s and 0.5 s at 40 M a second; the walltime one says no cost
    assert shard_cost(measured({"old": {"mean_ns": 10.0}})) is None and shard_cost({}) is None
