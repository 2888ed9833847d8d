"""Which run a change compares with: the base branch's run at the commit the change was built on
(a pull request's base), else the branch's latest; never a run forwarded with shards missing."""

from codspeed_wire.api import CloseRequest
from tests.factories import bundle, push


def _run(agg, isolated, project, run_id, commit, costs, **meta):
    for shard, cost in costs.items():
        data = bundle(10 + int(shard), [f"t{shard}::x"], costs={f"t{shard}::x": cost})
        agg.arrivals.record(push(agg, project, run_id, shard, data, total=2, commit=commit, **meta)["key"])
    return isolated.finalize_all(project, run_id) if len(costs) == 2 else None


def test_a_pull_request_compares_with_the_run_at_its_base_commit_not_the_latest(isolated, project, run_id):
    agg = isolated.aggregator
    old, new = "a" * 40, "b" * 40
    assert _run(agg, isolated, project, f"{run_id}-main-1", old, {"1": 1000, "2": 1000}) == "forwarded"
    assert _run(agg, isolated, project, f"{run_id}-main-2", new, {"1": 2000, "2": 2000}) == "forwarded"  # main moved on
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    _run(agg, isolated, project, f"{run_id}-pr", "c" * 40, {"1": 1100, "2": 1100}, **pull, base_commit=old)
    report = agg.reports.report(project, f"{run_id}-pr")
    assert report.baseline["run_id"] == f"{run_id}-main-1" and report.baseline["commit"] == old
    assert report.baseline["why"] == "main's run at the change's base commit aaaaaaaaaaaa"
    assert report.counts.regressions == 2 and round(report.counts.worst_regression, 2) == 0.1  # +10%, not -45%
    _run(agg, isolated, project, f"{run_id}-pr-2", "d" * 40, {"1": 1100, "2": 1100}, **pull,
         base_commit="9" * 40)  # a base commit no run was forwarded at: the latest
    fallback = agg.reports.report(project, f"{run_id}-pr-2").baseline
    assert fallback["run_id"] == f"{run_id}-main-2"
    assert fallback["why"] == "main's latest run: none was forwarded at the change's base commit 999999999999"


def test_without_a_run_at_its_base_commit_a_change_compares_with_the_nearest_ancestor_that_has_one(
        isolated, project, run_id):
    agg = isolated.aggregator
    older, nearest, newer = "a" * 40, "b" * 40, "c" * 40
    for number, (commit, cost) in enumerate(((older, 3000), (nearest, 1000), (newer, 2000)), start=1):
        assert _run(agg, isolated, project, f"{run_id}-main-{number}", commit, {"1": cost, "2": cost}) == "forwarded"
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    base = "9" * 40  # main's commit the branch left from, never benchmarked; its parents as git lists them
    _run(agg, isolated, project, f"{run_id}-pr", "d" * 40, {"1": 1100, "2": 1100}, **pull, base_commit=base,
         base_ancestors=["8" * 40, nearest, older])
    report = agg.reports.report(project, f"{run_id}-pr")
    assert report.baseline["run_id"] == f"{run_id}-main-2" and report.baseline["commit"] == nearest
    assert report.baseline["why"] == ("main's run at bbbbbbbbbbbb, 2 commits before the change's base commit "
                                      "999999999999: the nearest with a run")
    assert report.counts.regressions == 2 and round(report.counts.worst_regression, 2) == 0.1  # not -45%, not -63%
    _run(agg, isolated, project, f"{run_id}-pr-2", "e" * 40, {"1": 1100, "2": 1100}, **pull, base_commit=base,
         base_ancestors=["8" * 40, "7" * 40])  # none of them has a run: main's latest
    assert agg.reports.report(project, f"{run_id}-pr-2").baseline["why"] == (
        "main's latest run: none was forwarded at the change's base commit 999999999999 or the 2 commits before it")


def test_a_run_forwarded_with_a_shard_missing_is_never_the_baseline(isolated, project, run_id):
    agg = isolated.aggregator
    assert _run(agg, isolated, project, f"{run_id}-main-1", "a" * 40, {"1": 1000, "2": 1000}) == "forwarded"
    _run(agg, isolated, project, f"{run_id}-main-2", "b" * 40, {"1": 5000})  # shard 2 never comes
    agg.closing.close(CloseRequest(project=project, run_id=f"{run_id}-main-2"))
    assert isolated.finalize_all(project, f"{run_id}-main-2") == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") == f"{run_id}-main-1"
