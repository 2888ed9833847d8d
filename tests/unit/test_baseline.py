from codspeed_aggregator.domain.baseline import branch_of, complete, result_sources
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_aggregator.domain.outcome import CarriedShard
from codspeed_aggregator.domain.records import FORWARDED, RunRecord, ShardRecord, Snapshot

NAMES: dict[str, list[str]] = {}  # each bundle's benchmark names, by key, as the results in the bucket hold them


def _shard(name, *benchmarks, run="k"):
    key = f"{run}/{name}"
    NAMES[key] = list(benchmarks)
    return ShardRecord(name, "arrived", benchmarks=len(benchmarks), size=10, key=key, results_kept=True)


def _run(run_id="new", skipped=()):
    return RunRecord(
        project="a/b",
        run_id=run_id,
        groups={"": Manifest(total=3, indexed=True)},
        skipped=tuple(skipped),
        commit="c" * 40,
    )


BASELINE = Snapshot(
    RunRecord(
        project="a/b", run_id="base", groups={"": Manifest(total=3, indexed=True)}, state=FORWARDED, commit="b" * 40
    ),
    {"1": _shard("1", "t1::a", "t1::b"), "2": _shard("2", "t2::a"), "3": _shard("3", "t3::a")},
)


def test_branch_of_refs():
    assert branch_of("refs/heads/main") == "main"
    assert branch_of("release/1.x") == "release/1.x"
    assert branch_of("refs/pull/42/merge") is None and branch_of("refs/tags/v1") is None and branch_of(None) is None


def test_skipped_shards_the_baseline_has_are_carried_with_their_source():
    arrived = {"1": _shard("1", "t1::a", "t1::b", run="r"), "2": _shard("2", "t2::a", run="r")}
    completion = complete(_run(skipped=["3"]), arrived, "main", BASELINE, NAMES)
    assert list(completion.carried) == ["3"] and completion.carried["3"].key == "k/3"
    assert completion.outcome.carried["3"] == CarriedShard(
        run_id="base", commit="b" * 40, branch="main", benchmarks=1, size=10, group="", key="k/3"
    )
    assert completion.outcome.missing_benchmarks == () and completion.outcome.missing_benchmarks_total == 0


def test_a_skipped_shard_the_baseline_did_not_receive_comes_from_the_run_that_last_did():
    older = RunRecord(project="a/b", run_id="older", groups={}, state=FORWARDED, commit="a" * 40)
    without_3 = Snapshot(BASELINE.run, {n: BASELINE.shards[n] for n in ("1", "2")})
    earlier = {"3": (older, _shard("3", "t3::a", run="o")), "2": (older, _shard("2", "t2::old", run="o"))}
    completion = complete(
        _run(skipped=["2", "3"]), {"1": _shard("1", "t1::a", "t1::b", run="r")}, "main", without_3, NAMES, earlier
    )
    assert {name: s.key for name, s in completion.carried.items()} == {"2": "k/2", "3": "o/3"}  # the baseline's first
    assert completion.outcome.carried["3"] == CarriedShard(
        run_id="older", commit="a" * 40, branch="main", benchmarks=1, size=10, group="", key="o/3"
    )
    assert completion.outcome.carried["2"].run_id == "base"
    assert completion.outcome.baseline is not None and completion.outcome.baseline.run_id == "base"
    assert completion.outcome.missing_benchmarks == ()


def test_a_carried_shards_results_are_found_where_its_source_run_kept_them():
    run = Snapshot(_run(skipped=["3"]), {"1": _shard("1", "t1::a", run="r")})
    run.run.outcome = complete(run.run, run.arrived(), "main", BASELINE, NAMES).outcome
    assert result_sources(run) == {"1": ("r/1", 1), "3": ("k/3", 1)}
    legacy = Snapshot(run.run, {"1": ShardRecord("1", "arrived", key="old/1", benchmarks=4)})  # counted before results/
    assert result_sources(legacy) == {"3": ("k/3", 1)}


def test_benchmarks_gone_are_listed_unless_a_skipped_shard_explains_them():
    run = _run(skipped=["2"])
    baseline = Snapshot(BASELINE.run, {"1": BASELINE.shards["1"], "3": BASELINE.shards["3"]})  # shard 2 not in it
    completion = complete(run, {"1": _shard("1", "t1::a", run="r"), "3": _shard("3", run="r")}, "main", baseline, NAMES)
    assert completion.carried == {}
    assert completion.outcome.missing_benchmarks == ("t1::b", "t3::a")
    assert completion.outcome.missing_benchmarks_total == 2
    explained = complete(
        _run(skipped=["3"]),
        {"1": _shard("1", "t1::a", "t1::b", run="r")},
        "main",
        Snapshot(BASELINE.run, {"1": BASELINE.shards["1"]}),
        NAMES,
    )
    assert explained.outcome.missing_benchmarks == ()


def test_without_a_baseline_skipped_shards_stay_skipped_and_the_report_says_why():
    completion = complete(_run(skipped=["3"]), {"1": _shard("1", "t1::a")}, "main", None)
    assert completion.carried == {} and completion.outcome.baseline is None
    assert "no forwarded run on main yet" in (completion.outcome.note or "")


def test_the_report_says_why_it_compares_with_its_baseline():
    from codspeed_aggregator.domain.baseline import baseline_why
    from codspeed_aggregator.domain.records import RunRecord

    change = RunRecord(project="acme/widgets", run_id="7", groups={}, ref="refs/pull/4/merge", base_commit="ab" * 20)
    assert baseline_why(change, "AB" * 20, "main") == "main's run at the change's base commit abababababab"
    assert baseline_why(change, "cd" * 20, "main") == (
        "main's latest run: none was forwarded at the change's base commit abababababab"
    )
    change.base_commit = None
    assert baseline_why(change, "cd" * 20, "main") == "main's latest run: the change names no base commit"
    push = RunRecord(project="acme/widgets", run_id="8", groups={}, ref="refs/heads/main")
    assert baseline_why(push, "cd" * 20, "main") == "main's latest run before this one"


def test_a_skip_carries_the_shard_of_every_executor_the_baseline_ran_it_under():
    baseline = Snapshot(
        RunRecord(
            project="a/b",
            run_id="base2",
            groups={"": Manifest(total=2, indexed=True)},
            state=FORWARDED,
            commit="b" * 40,
            variants=("|valgrind", "|walltime"),
        ),
        {
            "1": _shard("1", "t1::a", run="w"),
            "2": _shard("2", "t2::a", run="w"),
            "2~walltime": _shard("2~walltime", "t2::a", run="w"),
        },
    )
    arrived = {"1": _shard("1", "t1::a", run="r2")}
    completion = complete(_run(skipped=["2"]), arrived, "main", baseline, NAMES)
    assert sorted(completion.carried) == ["2", "2~walltime"]  # the run itself pushed valgrind only so far
    assert completion.outcome.missing_benchmarks == ()
