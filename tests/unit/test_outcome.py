"""What a run's end decided, as its record keeps it: one codec, which reads what 1.0.0 wrote (a
DynamoDB map gives its counts back as ``Decimal``) and keeps what a later release added."""

import json
from decimal import Decimal

from codspeed_aggregator.domain.outcome import CarriedShard, ChosenBaseline, Outcome
from codspeed_wire.report import Overlap

OUTCOME = Outcome(
    baseline=ChosenBaseline("7001", "b" * 40, "main", "main's latest run before this one"),
    carried={
        "3": CarriedShard("7001", "b" * 40, "main", benchmarks=4, size=10, group="bench", key="bundles/k/3"),
        "4": CarriedShard("6990", None, "main", benchmarks=None, size=None, left_out="its bundle expired"),
    },
    missing_benchmarks=("t1::b",),
    missing_benchmarks_total=3,
    overlaps=(Overlap(benchmark="t2::a", executor="valgrind", shards=["1", "2"], in_shards=2),),
    overlaps_total=1,
)


def test_an_outcome_is_read_back_as_it_was_written():
    assert Outcome.from_item(json.loads(json.dumps(OUTCOME.to_item()))) == OUTCOME
    assert Outcome.from_item(Outcome().to_item()) == Outcome()


def test_a_carried_shard_is_written_as_1_0_0_wrote_it_with_no_key_where_no_results_were_kept():
    item = OUTCOME.to_item()["carried"]
    assert item["3"] == {
        "run_id": "7001",
        "commit": "b" * 40,
        "branch": "main",
        "benchmarks": 4,
        "size": 10,
        "group": "bench",
        "key": "bundles/k/3",
    }
    assert "key" not in item["4"] and item["4"]["left_out"] == "its bundle expired"


def test_what_1_0_0_wrote_on_a_run_item_is_read_with_its_counts_as_ints():
    as_dynamodb_gives_it = {  # no total of missing benchmarks where none had a baseline; numbers as Decimal
        "baseline": None,
        "carried": {"2": {"run_id": "40", "commit": "abc", "branch": "main", "benchmarks": Decimal(3), "group": ""}},
        "missing_benchmarks": ["a", "b"],
        "note": "no forwarded run on main yet",
        "overlaps": [{"benchmark": "x", "executor": "valgrind", "shards": ["1", "2"], "in_shards": Decimal(2)}],
        "overlaps_total": Decimal(1),
    }
    read = Outcome.from_item(as_dynamodb_gives_it)
    assert read.missing_benchmarks_total == 2 and read.overlaps_total == 1 and read.overlaps[0].in_shards == 2
    assert read.carried["2"].benchmarks == 3 and type(read.carried["2"].benchmarks) is int
    assert read.carried_benchmarks() == 3 and read.carried_groups() == [""]
    assert read.note == "no forwarded run on main yet" and read.later_fields == {}


def test_the_fields_a_later_release_wrote_are_kept_at_every_level():
    item = OUTCOME.to_item()
    item["verdict"] = "later"
    item["baseline"]["tier"] = 2
    item["carried"]["3"]["source_region"] = "eu"
    read = Outcome.from_item(json.loads(json.dumps(item)))
    assert read.later_fields == {"verdict": "later"}
    assert read.baseline is not None and read.baseline.later_fields == {"tier": 2}
    assert read.carried["3"].later_fields == {"source_region": "eu"}
    assert read.to_item() == item
