import pytest

from codspeed_aggregator.domain.errors import Conflict, Unprocessable
from codspeed_aggregator.domain.manifest import Manifest


def test_count_manifest_names_its_shards_and_completes_when_all_arrive():
    manifest = Manifest(total=3, indexed=True)
    assert manifest.expected_names() == ("1", "2", "3")
    assert not manifest.is_complete({"1", "3"})
    assert manifest.is_complete({"1", "2", "3"})


def test_names_manifest_completes_on_its_names_only():
    manifest = Manifest(names=("parse", "lint"))
    assert not manifest.is_complete({"parse", "other"})
    assert manifest.is_complete({"parse", "lint"})


def test_run_part_count_completes_on_the_number_of_distinct_shards():
    manifest = Manifest(total=2)
    assert manifest.expected_names() is None
    assert manifest.is_complete({"bench-a", "bench-b"})


def test_no_manifest_never_completes_by_itself():
    assert not Manifest().is_complete({"a", "b", "c"})


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
