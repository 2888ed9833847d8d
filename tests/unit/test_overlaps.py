"""A benchmark measured twice in one run: two shards of one executor hold it. Two executors
measuring one benchmark is normal, each its own measure."""

from codspeed_aggregator.domain.overlaps import SHARDS_NAMED, overlaps
from codspeed_aggregator.domain.records import ShardRecord
from codspeed_wire.report import Overlap


def _shard(name: str, executor: str = "valgrind") -> ShardRecord:
    return ShardRecord(name=name, state="arrived", key=f"k/{name}", executor=executor)


def test_a_benchmark_in_two_shards_of_one_executor_is_named_with_both():
    arrived = {n: _shard(n) for n in ("1", "2", "3")}
    names = {"k/1": ["a", "b"], "k/2": ["b", "c"], "k/3": ["c", "d"]}
    assert overlaps(arrived, names) == (
        (
            Overlap(benchmark="b", executor="valgrind", shards=["1", "2"], in_shards=2),
            Overlap(benchmark="c", executor="valgrind", shards=["2", "3"], in_shards=2),
        ),
        2,
    )


def test_two_executors_measuring_one_benchmark_and_a_name_twice_in_one_shard_are_no_overlap():
    arrived = {"1": _shard("1"), "1~walltime": _shard("1~walltime", "walltime")}
    names = {"k/1": ["a", "a"], "k/1~walltime": ["a"]}
    assert overlaps(arrived, names) == ((), 0)


def test_many_overlaps_are_counted_all_and_listed_within_the_runs_item_budget():
    arrived = {str(i): _shard(str(i)) for i in range(12)}
    names = {f"k/{i}": [f"bench_{j}_" + "x" * 300 for j in range(500)] for i in range(12)}
    listed, total = overlaps(arrived, names)
    assert total == 500 and 0 < len(listed) < 200
    assert listed[0].in_shards == 12 and len(listed[0].shards) == SHARDS_NAMED
