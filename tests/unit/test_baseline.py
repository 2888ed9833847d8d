from codspeed_aggregator.domain.baseline import branch_of, complete
from codspeed_aggregator.domain.ledger import FORWARDED, RunRecord, ShardRecord, Snapshot
from codspeed_aggregator.domain.manifest import Manifest


def _shard(name, *benchmarks):
    return ShardRecord(name, "arrived", benchmarks=len(benchmarks), benchmark_names=list(benchmarks), size=10, key=f"k/{name}")


def _run(run_id="new", skipped=()):
    return RunRecord(project="a/b", run_id=run_id, groups={"": Manifest(total=3, indexed=True)}, skipped=tuple(skipped), commit="c" * 40)


BASELINE = Snapshot(
    RunRecord(project="a/b", run_id="base", groups={"": Manifest(total=3, indexed=True)}, state=FORWARDED, commit="b" * 40),
    {"1": _shard("1", "t1::a", "t1::b"), "2": _shard("2", "t2::a"), "3": _shard("3", "t3::a")},
)


def test_branch_of_refs():
    assert branch_of("refs/heads/main") == "main"
    assert branch_of("release/1.x") == "release/1.x"
    assert branch_of("refs/pull/42/merge") is None and branch_of("refs/tags/v1") is None and branch_of(None) is None


def test_skipped_shards_the_baseline_has_are_carried_with_their_source():
    completion = complete(_run(skipped=["3"]), {"1": _shard("1", "t1::a", "t1::b"), "2": _shard("2", "t2::a")}, "main", BASELINE)
    assert list(completion.carried) == ["3"] and completion.carried["3"].key == "k/3"
    assert completion.outcome["carried"]["3"] == {"run_id": "base", "commit": "b" * 40, "branch": "main", "benchmarks": 1, "size": 10}
    assert completion.outcome["missing_benchmarks"] == []


def test_benchmarks_gone_are_listed_unless_a_skipped_shard_explains_them():
    run = _run(skipped=["2"])
    baseline = Snapshot(BASELINE.run, {"1": BASELINE.shards["1"], "3": BASELINE.shards["3"]})  # shard 2 not in it
    completion = complete(run, {"1": _shard("1", "t1::a"), "3": _shard("3")}, "main", baseline)
    assert completion.carried == {}
    assert completion.outcome["missing_benchmarks"] == ["t1::b", "t3::a"]
    explained = complete(_run(skipped=["3"]), {"1": _shard("1", "t1::a", "t1::b")},
                         "main", Snapshot(BASELINE.run, {"1": BASELINE.shards["1"]}))
    assert explained.outcome["missing_benchmarks"] == []


def test_without_a_baseline_skipped_shards_stay_skipped_and_the_report_says_why():
    completion = complete(_run(skipped=["3"]), {"1": _shard("1", "t1::a")}, "main", None)
    assert completion.carried == {} and completion.outcome["baseline"] is None
    assert "no forwarded run on main yet" in completion.outcome["note"]
