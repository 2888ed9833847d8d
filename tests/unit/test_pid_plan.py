"""Which pids a merge renumbers, up front (the finalizer's) or as the shards come (the offline merge's)."""

from dataclasses import dataclass

from codspeed_aggregator.domain.pid_plan import plan_pids, planned


def test_plan_keeps_first_pids_and_moves_collisions_to_free_pids_of_the_same_width():
    plan = plan_pids([("a", [4242, 100]), ("b", [4242]), ("c", [4242, 4243])])
    assert plan["a"] == {}
    assert plan["b"] == {4242: 4244}
    assert plan["c"] == {4242: 4245}  # 4243 belongs to c itself, 4244 went to b
    assert all(len(str(new)) == len(str(old)) for moves in plan.values() for old, new in moves.items())


def test_plan_widens_only_when_no_pid_of_that_width_is_free():
    plan = plan_pids([(str(i), [5]) for i in range(11)])
    news = [moves[5] for moves in plan.values() if moves]
    assert sorted(news)[:9] == [0, 1, 2, 3, 4, 6, 7, 8, 9] and news[-1] == 10


def test_a_pid_near_the_top_of_its_width_is_chosen_in_constant_memory():
    import tracemalloc

    taken = list(range(10**9, 10**9 + 5))
    tracemalloc.start()
    plan = plan_pids([("a", [9_999_999_999]), ("b", [9_999_999_999]), ("c", taken), ("d", taken)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert plan["b"] == {9_999_999_999: 1_000_000_000 + 5} and peak < 1 << 20


@dataclass
class _Shard:
    name: str
    pids: tuple[int, ...]


def test_pids_planned_as_the_shards_come_avoid_only_the_pids_before_them():
    """The offline merge splices each bundle as soon as it is verified, before the next ones'
    pids are known: a moved pid then avoids the pids of the shards before it, as the one-read
    merge plans bundles it checks as it reads them; up front, it avoids every shard's."""
    shards = [_Shard("a", (4242, 100)), _Shard("b", (4242,)), _Shard("c", (4243, 4242))]
    handed = []

    def one_by_one():
        for shard in shards:
            handed.append(shard.name)
            yield shard

    seen = []
    for shard, moves in planned(one_by_one(), as_they_come=True):
        seen.append((shard.name, moves, list(handed)))
    assert seen == [("a", {}, ["a"]), ("b", {4242: 4243}, ["a", "b"]), ("c", {4243: 4244, 4242: 4245}, ["a", "b", "c"])]
    up_front = [(shard.name, moves) for shard, moves in planned(iter(shards))]
    assert up_front == [("a", {}), ("b", {4242: 4244}), ("c", {4242: 4245})]  # 4243 is c's own: b avoids it
