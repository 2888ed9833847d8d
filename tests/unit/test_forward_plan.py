"""A part's slice of a forward plan: its own shards, its carried entries, its place in its group."""

import json
from dataclasses import replace

from codspeed_aggregator.domain.baseline import Completion
from codspeed_aggregator.domain.forward_plan import ForwardPlan, PartPlan
from codspeed_aggregator.domain.forwarding import RunForward
from codspeed_aggregator.domain.outcome import CarriedShard, Outcome
from codspeed_aggregator.domain.records import ARRIVED, RunRecord, ShardRecord
from codspeed_aggregator.domain.upstream_parts import UpstreamPart


def _plan() -> ForwardPlan:
    shards = {
        name: ShardRecord(name=name, state=ARRIVED, key=f"bundles/p/r/{name}/u.tar.gz", pids=[1], group=group)
        for name, group in (("a", ""), ("b", ""), ("c", ""), ("w", "wall"))
    }
    carried = {"c": CarriedShard(run_id="7001", commit="b" * 40, key=shards["c"].key)}
    uploads = [
        UpstreamPart(("a",), True, "", "g-1"),
        UpstreamPart(("w",), False, "wall"),
        UpstreamPart(("b", "c"), True, "", "g-2"),
    ]
    return ForwardPlan(
        run=RunRecord(project="p", run_id="r", groups={}),
        shards=shards,
        completion=Completion({"c": shards["c"]}, Outcome(carried=carried)),
        baseline_run="7001",
        base_metadata={"commitHash": "abc"},
        uploads=uploads,
        part_ids=["i0", "i1", "i2"],
        todo=[0, 2],
    )


def test_a_part_holds_only_its_own_shards_and_its_place_among_its_groups_merged_parts():
    plan = _plan()
    last = plan.part(2)
    assert (list(last.shards), last.number, last.group_parts, last.sends, last.part_id) == (["b", "c"], 2, 2, 2, "i2")
    assert last.carried == {"c": CarriedShard(run_id="7001", commit="b" * 40, key="bundles/p/r/c/u.tar.gz")}
    as_sent = plan.part(1)
    assert (as_sent.number, as_sent.group_parts, as_sent.carried) == (0, 0, {})


def test_a_part_comes_back_from_its_json_as_it_was_written():
    part = _plan().part(2)
    assert PartPlan.from_item(json.loads(json.dumps(part.to_item()))) == part


def test_the_upstream_runs_a_run_went_under_are_listed_whole_until_the_item_would_grow_with_its_parts():
    from codspeed_aggregator.domain.forward_plan import MAX_RUN_IDS_BYTES, MAX_RUN_IDS_LISTED, UpstreamRuns

    assert UpstreamRuns(["gh-1"]).said() == {"run_id": "gh-1"}  # CodSpeed's: one run, the CI's
    assert UpstreamRuns([]).said() == {"run_id": None}
    twenty = [f"u{i}" for i in range(MAX_RUN_IDS_LISTED)]
    assert UpstreamRuns(twenty).said() == {"run_id": ",".join(twenty)}
    assert UpstreamRuns([*twenty, "u20"]).said() == {"run_id": ",".join(twenty), "run_ids": 21}
    wide = ["€" * 400 + str(i) for i in range(5)]  # 1,201 bytes each: one fits in 2 KiB
    assert UpstreamRuns(wide).said() == {"run_id": wide[0], "run_ids": 5}
    assert len(UpstreamRuns(wide).said()["run_id"].encode()) <= MAX_RUN_IDS_BYTES
    assert UpstreamRuns(["€" * 2000]).said() == {"run_id": None, "run_ids": 1}  # none fits: counted, all in S3


def test_a_parts_run_of_one_shard_says_one_shard():
    plan = _plan()
    parts = replace(
        plan,
        run=replace(plan.run, forward=RunForward(sends_parts=True)),
        shards={"a": plan.shards["a"]},
        completion=Completion(),
    )
    assert parts.outcome_said([])[0] == "1 shard, each its own part upstream"
