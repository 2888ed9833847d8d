import pytest

from codspeed_aggregator.domain.errors import Conflict, Unprocessable
from codspeed_aggregator.domain.manifest import Manifest


def test_count_manifest_names_its_shards_and_completes_when_all_arrive():
    manifest = Manifest(total=3, indexed=True)
    assert manifest.expected_names() == ("1", "2", "3")
    assert not manifest.is_complete_count(2) and manifest.is_complete_count(3)


def test_names_manifest_completes_on_its_names_only():
    manifest = Manifest(names=("parse", "lint"))
    with pytest.raises(Unprocessable):  # an outsider never uploads, so a count of distinct shards is a count of names
        manifest.admit("other")
    assert not manifest.is_complete_count(1) and manifest.is_complete_count(2)


def test_run_part_count_completes_on_the_number_of_distinct_shards_per_variant():
    manifest = Manifest(total=2)
    assert manifest.expected_names() is None
    assert manifest.is_complete_count(2) and not manifest.is_complete_count(3, variants=2)


def test_no_manifest_never_completes_by_itself():
    assert not Manifest().is_complete_count(3)


def test_a_run_is_complete_when_every_group_seen_is():
    from codspeed_aggregator.domain.records import RunRecord, variant_key

    run = RunRecord(
        project="a/b",
        run_id="1",
        groups={"a": Manifest(total=3), "b": Manifest(total=1)},
        variants=(variant_key("a", "valgrind/0"), variant_key("b", "valgrind/0"), variant_key("b", "walltime/1")),
        group_counts={"a": 3, "b": 1},
    )
    assert not run.complete() and run.expected_count() == 5  # b: one job, two executors
    run.group_counts["b"] = 2
    assert run.complete() and "3 shards in job a; 1 shard in job b" == run.describe()
    assert not RunRecord(project="a/b", run_id="1", groups={}).complete()


def test_a_run_opened_with_skips_is_complete_when_the_others_are_in():
    from codspeed_aggregator.domain.records import RunRecord

    run = RunRecord(
        project="a/b",
        run_id="1",
        groups={"": Manifest(total=4, indexed=True), "job": Manifest(total=1)},
        skipped=("3", "9"),
        group_counts={"": 2, "job": 1},
    )
    assert not run.complete() and run.skipped_in("", run.groups[""]) == 1  # 9 is none of its shards
    run.group_counts[""] = 3
    assert run.complete() and run.skipped_in("job", run.groups["job"]) == 0  # a runner's job group names no skips


def test_a_shard_outside_the_manifest_is_refused_by_name():
    with pytest.raises(Unprocessable, match="shard '5' is not in the run's manifest \\(4 shards\\)"):
        Manifest(total=4, indexed=True).admit("5")
    Manifest(total=4).admit("anything")  # a count without names admits any name


def test_a_disagreeing_manifest_names_both():
    first = Manifest(total=4, indexed=True)
    with pytest.raises(Conflict, match="expects 3 shards, but the run was opened expecting 4 shards"):
        Manifest(total=3, indexed=True).agree(first)
    Manifest().agree(first)  # a shard that states none agrees with any
    first.agree(first)


def test_manifest_round_trips_through_its_item():
    for manifest in (Manifest(total=4, indexed=True), Manifest(names=("a", "b")), Manifest()):
        assert Manifest.from_item(manifest.to_item()) == manifest


def test_a_client_group_of_two_executors_expects_each_executors_shards_and_skips_carry_both():
    from codspeed_aggregator.domain.records import RunRecord, variant_key

    run = RunRecord(
        project="a/b",
        run_id="1",
        groups={"": Manifest(total=3, indexed=True)},
        skipped=("3",),
        variants=(variant_key("", "walltime"), variant_key("", "valgrind")),
        group_counts={"": 3},
    )
    assert run.executors_of("") == ("valgrind", "walltime")  # valgrind's first: its shards are keyed by name alone
    assert run.skipped_in("", run.groups[""]) == 2 and not run.complete()  # 1, 2 of one executor, 1 of the other
    run.group_counts[""] = 4
    assert run.complete() and run.expected_count() == 6
    assert RunRecord(project="a/b", run_id="1", groups={"": Manifest(total=3, indexed=True)}).executors_of("") == (
        "valgrind",
    )  # none pushed yet
