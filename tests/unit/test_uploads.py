"""Which run parts a run forwards (domain.uploads): one group at a time, under runPartIds that
stay the same across attempts, so that the upstream holds each benchmark once."""

from hypothesis import given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain.records import ARRIVED, ShardRecord
from codspeed_aggregator.domain.upstream_parts import UpstreamPart, merged_part_id, part_id, plan_build, plan_forward


def _shard(name, group="", executor="valgrind", benchmarks=1, key=None):
    return ShardRecord(
        name=name,
        state=ARRIVED,
        group=group,
        executor=executor,
        benchmarks=benchmarks,
        size=10,
        key=key or f"bundles/{name}",
        version_id="v1",
    )


def _shards(*shards):
    return {s.name: s for s in shards}


def test_each_group_is_its_own_part_and_a_lone_valgrind_shard_goes_as_sent():
    shards = _shards(
        _shard("a1", "a"), _shard("a2", "a"), _shard("b1", "b"), _shard("w", "wall", "walltime"), _shard("lint", "lint")
    )
    plan = plan_forward(shards, limit=1000)
    assert [(u.shards, u.merged, u.run_part_id) for u in plan] == [
        (("a1", "a2"), True, 'a-{"aggregated-part":1,"executor":"valgrind"}'),
        (("b1",), False, None),
        (("lint",), False, None),
        (("w",), False, None),
    ]


def test_a_later_attempt_keeps_the_earlier_parts_and_adds_new_ones_numbered_on():
    first = plan_forward(_shards(_shard("1", benchmarks=3), _shard("2", benchmarks=3)), limit=5)
    assert [u.run_part_id for u in first] == [merged_part_id("", 1), merged_part_id("", 2)]
    grown = _shards(
        _shard("1", benchmarks=3), _shard("2", benchmarks=3), _shard("0", benchmarks=1), _shard("3", benchmarks=1)
    )
    again = plan_forward(grown, limit=5, kept=first)
    # "0" sorts first and would shift every part of a fresh plan: kept, the parts stay where they were
    assert [(u.shards, u.run_part_id) for u in again] == [
        (("1",), merged_part_id("", 1)),
        (("2",), merged_part_id("", 2)),
        (("0", "3"), merged_part_id("", 3)),
    ]


def test_a_part_changes_its_id_only_when_a_shard_in_it_was_re_run():
    shards = _shards(_shard("1"), _shard("2"))
    [part] = plan_forward(shards, limit=10)
    rerun = {**shards, "2": _shard("2", key="bundles/2-again")}
    assert part_id(part, shards) == part_id(part, dict(shards)) != part_id(part, rerun)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from("abcdefgh"),
                st.sampled_from(["", "x", "y"]),
                st.sampled_from(["valgrind", "walltime"]),
                st.integers(0, 6),
            ),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(1, 8),
)
def test_over_any_attempts_every_shard_stands_in_exactly_one_part_and_ids_never_repeat(attempts, limit):
    """The upstream keeps the last upload of each runPartId: whatever shards come in whatever
    attempts, each shard is in exactly one part of the plan, and a part id, once given to some
    shards, never goes to a part without them (or the upstream would hold them twice)."""
    shards, kept, holder = {}, [], {}
    for attempt in attempts:
        for name, group, executor, benchmarks in attempt:
            if name not in shards:  # a shard keeps its group and executor (a re-run is the same job)
                shards[name] = _shard(name, group, executor, benchmarks)
        plan = plan_forward(shards, limit, kept=kept)
        placed = [n for u in plan for n in u.shards]
        assert sorted(placed) == sorted(shards)
        keys = [u.key for u in plan]
        assert len(keys) == len(set(keys))
        for upload in plan:
            for name in upload.shards:
                assert holder.setdefault(name, upload.key) == upload.key  # a shard never moves to another part
        kept = plan


def test_a_plan_item_round_trips():
    upload = UpstreamPart(("a", "b"), True, "bench", merged_part_id("bench", 2))
    assert (
        UpstreamPart.from_item(upload.to_item()) == upload
        and upload.key == 'bench-{"aggregated-part":2,"executor":"valgrind"}'
    )
    assert UpstreamPart(("w",), False, "wall").key == "shard:w"


def test_a_kept_part_left_with_no_shard_frees_its_id_and_no_id_is_given_twice():
    first = plan_forward(_shards(*(_shard(n, benchmarks=3) for n in "abc")), limit=3)
    assert [u.run_part_id for u in first] == [merged_part_id("", n) for n in (1, 2, 3)]
    # shard a (part 1) no longer in the run (carried once, not any more); two shards come
    later = plan_forward(_shards(*(_shard(n, benchmarks=3) for n in "bcde")), limit=3, kept=first)
    ids = [u.run_part_id for u in later]
    assert ids[:2] == [merged_part_id("", 2), merged_part_id("", 3)] and len(set(ids)) == len(ids) == 4


def test_a_shard_over_the_limit_goes_alone_as_sent_and_merged_parts_stay_under_it():
    shards = _shards(
        _shard("big", benchmarks=5000),
        _shard("1", benchmarks=600),
        _shard("2", benchmarks=600),
        _shard("3", benchmarks=300),
    )
    plan = plan_forward(shards, limit=1000)
    assert [(u.shards, u.merged) for u in plan] == [(("big",), False), (("1",), True), (("2", "3"), True)]
    assert all(sum(shards[n].benchmarks for n in u.shards) <= 1000 for u in plan if u.merged)


def test_a_parts_run_sends_every_shard_as_it_was_sent_and_keeps_its_earlier_parts():
    shards = _shards(_shard("a1", "a"), _shard("a2", "a"), _shard("1"), _shard("2"), _shard("w", executor="walltime"))
    plan = plan_forward(shards, limit=1000, merge=False)
    assert [(u.shards, u.merged, u.key) for u in plan] == [
        (("1",), False, "shard:1"),
        (("2",), False, "shard:2"),
        (("a1",), False, "shard:a1"),
        (("a2",), False, "shard:a2"),
        (("w",), False, "shard:w"),
    ]
    again = plan_forward({**shards, "3": _shard("3")}, limit=1000, kept=plan, merge=False)
    assert [u.key for u in again] == [u.key for u in plan] + ["shard:3"]


def test_a_buildkite_build_is_one_upload_an_executor_every_steps_shards_in_it_memorys_each_alone():
    """CodSpeed's runner sends Buildkite uploads without run parts: a build goes as one upload an executor
    (valgrind first, then by name), whatever its steps, a lone shard merged too; memory's artifacts do not merge."""
    shards = _shards(
        _shard("s1", "step"), _shard("s2", "step"), _shard("one", "single"), _shard("push", ""),
        _shard("w1", "wall", "walltime"), _shard("w2", "wall2", "walltime"),
        _shard("m1", "mem", "memory"), _shard("m2", "mem", "memory"),
    )  # fmt: skip
    plan = plan_build(shards, limit=1000)
    assert [(u.shards, u.merged, u.group, u.run_part_id) for u in plan] == [
        (
            ("s1", "s2", "one", "push"),
            True,
            "valgrind",
            'codspeed-shard-aggregator-{"aggregated-build-part":1,"executor":"valgrind"}',
        ),
        (("m1",), False, "mem", None),
        (("m2",), False, "mem", None),
        (("w1", "w2"), True, "walltime", 'codspeed-shard-aggregator-{"aggregated-build-part":1,"executor":"walltime"}'),
    ]


def test_a_buildkite_builds_executor_past_the_benchmark_limit_is_several_uploads_each_benchmark_once():
    shards = _shards(*(_shard(f"s{i}", "step", benchmarks=400) for i in range(5)))
    plan = plan_build(shards, limit=1000)
    assert [u.shards for u in plan] == [("s0", "s1"), ("s2", "s3"), ("s4",)]
    assert [u.run_part_id for u in plan] == [
        f'codspeed-shard-aggregator-{{"aggregated-build-part":{n},"executor":"valgrind"}}' for n in (1, 2, 3)
    ]
