"""Which run a change compares with: the base branch's run at the commit the change was built on
(a pull request's base), else the branch's latest; never a run forwarded with shards missing."""

from dataclasses import replace

import pytest

from codspeed_aggregator.adapters.github_commits import GitHubCommits
from codspeed_wire.api import CloseRequest
from tests.factories import bundle, push
from tests.fake_github import FakeGitHub


def _run(agg, isolated, project, run_id, commit, costs, **meta):
    for shard, cost in costs.items():
        data = bundle(10 + int(shard), [f"t{shard}::x"], costs={f"t{shard}::x": cost})
        agg.record_arrival.record(push(agg, project, run_id, shard, data, total=2, commit=commit, **meta)["key"])
    return isolated.finalize_all(project, run_id, agg) if len(costs) == 2 else None


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


@pytest.mark.slow
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
    _run(
        agg, isolated, project, f"{run_id}-pr-2", "d" * 40, {"1": 1100, "2": 1100}, **pull, base_commit="9" * 40
    )  # a base commit no run was forwarded at: the latest
    fallback = agg.reports.report(project, f"{run_id}-pr-2").baseline
    assert fallback["run_id"] == f"{run_id}-main-2"
    assert fallback["why"] == "main's latest run: none was forwarded at the change's base commit 999999999999"


@pytest.mark.slow
def test_without_a_run_at_its_base_commit_a_change_compares_with_the_nearest_ancestor_that_has_one(
    isolated, project, run_id
):
    agg = isolated.aggregator
    older, nearest, newer = "a" * 40, "b" * 40, "c" * 40
    for number, (commit, cost) in enumerate(((older, 3000), (nearest, 1000), (newer, 2000)), start=1):
        assert _run(agg, isolated, project, f"{run_id}-main-{number}", commit, {"1": cost, "2": cost}) == "forwarded"
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    base = "9" * 40  # main's commit the branch left from, never benchmarked; its parents as git lists them
    _run(
        agg,
        isolated,
        project,
        f"{run_id}-pr",
        "d" * 40,
        {"1": 1100, "2": 1100},
        **pull,
        base_commit=base,
        base_ancestors=["8" * 40, nearest, older],
    )
    report = agg.reports.report(project, f"{run_id}-pr")
    assert report.baseline["run_id"] == f"{run_id}-main-2" and report.baseline["commit"] == nearest
    assert report.baseline["why"] == (
        "main's run at bbbbbbbbbbbb, 2 commits before the change's base commit 999999999999: the nearest with a run"
    )
    assert report.counts.regressions == 2 and round(report.counts.worst_regression, 2) == 0.1  # not -45%, not -63%
    _run(
        agg,
        isolated,
        project,
        f"{run_id}-pr-2",
        "e" * 40,
        {"1": 1100, "2": 1100},
        **pull,
        base_commit=base,
        base_ancestors=["8" * 40, "7" * 40],
    )  # none of them has a run: main's latest
    assert agg.reports.report(project, f"{run_id}-pr-2").baseline["why"] == (
        "main's latest run: none was forwarded at the change's base commit 999999999999 or the 2 commits before it"
    )


@pytest.mark.slow
def test_a_run_forwarded_with_a_shard_missing_is_never_the_baseline(isolated, project, run_id):
    agg = isolated.aggregator
    assert _run(agg, isolated, project, f"{run_id}-main-1", "a" * 40, {"1": 1000, "2": 1000}) == "forwarded"
    _run(agg, isolated, project, f"{run_id}-main-2", "b" * 40, {"1": 5000})  # shard 2 never comes
    agg.close_run.close(CloseRequest(project=project, run_id=f"{run_id}-main-2"))
    assert isolated.finalize_all(project, f"{run_id}-main-2") == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") == f"{run_id}-main-1"


@pytest.mark.slow
def test_a_pull_request_whose_upload_could_not_tell_its_merge_base_takes_githubs(isolated, github, project, run_id):
    """A depth-1 clone sends the base branch's tip (``pull_request.base.sha``) and no ancestors;
    the finalizer asks GitHub where the pull request left main, and the commits before."""
    before, fork_point = github.commit_on("main", "a" * 40), github.commit_on("main", "b" * 40)
    head = github.commit_on("feature", "c" * 40, fork_point)
    tip = github.commit_on("main", "d" * 40)  # main moved on
    github.pulls[4] = ("main", head)
    agg = replace(isolated.aggregator, github_commits=GitHubCommits(github.url, "gh-token"))
    assert _run(agg, isolated, project, f"{run_id}-main-1", before, {"1": 1000, "2": 1000}) == "forwarded"
    assert _run(agg, isolated, project, f"{run_id}-main-2", tip, {"1": 2000, "2": 2000}) == "forwarded"
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    assert github.reads == []  # a branch's runs ask nothing
    _run(agg, isolated, project, f"{run_id}-pr", head, {"1": 1100, "2": 1100}, **pull, base_commit=tip)
    report = agg.reports.report(project, f"{run_id}-pr")
    assert report.baseline["run_id"] == f"{run_id}-main-1" and report.baseline["why"] == (
        "main's run at aaaaaaaaaaaa, 1 commit before the change's base commit bbbbbbbbbbbb: the nearest with a run"
    )
    assert github.reads == [
        f"/repos/{project}/pulls/4",
        f"/repos/{project}/compare/main...{head}",
        f"/repos/{project}/commits",
    ]
    assert (
        report.counts.regressions == 2 and round(report.counts.worst_regression, 2) == 0.1
    )  # not -45% against the tip


@pytest.mark.slow
def test_a_token_github_refuses_leaves_the_uploads_base_commit_and_is_asked_no_more(
    isolated, github, project, run_id, caplog
):
    github.pulls[4] = ("main", github.commit_on("feature", "c" * 40))
    github.fail_with = 403
    agg = replace(isolated.aggregator, github_commits=GitHubCommits(github.url, "gh-token"))
    assert _run(agg, isolated, project, f"{run_id}-main", "d" * 40, {"1": 1000, "2": 1000}) == "forwarded"
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    for attempt in ("pr-1", "pr-2"):
        assert (
            _run(
                agg,
                isolated,
                project,
                f"{run_id}-{attempt}",
                "c" * 40,
                {"1": 1100, "2": 1100},
                **pull,
                base_commit="d" * 40,
            )
            == "forwarded"
        )
        assert agg.reports.report(project, f"{run_id}-{attempt}").baseline["why"] == (
            "main's run at the change's base commit dddddddddddd"
        )
    assert github.reads == [f"/repos/{project}/pulls/4"]
    assert f"GitHub did not tell the merge base of {project}#4 (403)" in caplog.text


def test_githubs_merge_base_comes_with_its_first_parents_only(github):
    root = github.commit_on("main", "1" * 40)
    side = github.commit_on("side", "2" * 40, root)
    merged = github.commit_on("main", "3" * 40, root, side)  # a merge commit: main first, the side branch second
    base = github.commit_on("main", "4" * 40)
    github.pulls[9] = ("main", github.commit_on("feature", "5" * 40, base))
    assert GitHubCommits(github.url, "t").merge_base("acme/widgets", 9, 50) == (base, [merged, root])
    assert GitHubCommits(github.url, "t").merge_base("acme/widgets", 9, 1) == (base, [merged])


@pytest.mark.slow
def test_a_baseline_forwarded_by_another_process_shows_in_the_next_partial_report_not_a_minute_later(
    isolated, project, run_id
):
    """The lookup's absence was kept a minute per process: for 60 s after main forwarded, partial
    reports said "no baseline yet" and hid a +30% regression."""
    agg = replace(isolated.aggregator, clock=lambda: 1_900_000_000.0)  # no time passes
    pull = {"ref": "refs/pull/4/merge", "base_ref": "main"}
    pr = [
        push(
            agg,
            project,
            f"{run_id}-pr",
            shard,
            bundle(10 + int(shard), [f"t{shard}::x"], costs={f"t{shard}::x": 1300}),
            total=2,
            commit="c" * 40,
            **pull,
        )["key"]
        for shard in ("1", "2")
    ]
    agg.record_arrival.record(pr[0])
    assert agg.reports.report(project, f"{run_id}-pr").baseline is None  # main has no run yet
    other = replace(isolated.aggregator)  # another Lambda instance forwards main's run
    assert _run(other, isolated, project, f"{run_id}-main", "a" * 40, {"1": 1000, "2": 1000}) == "forwarded"
    agg.record_arrival.record(pr[1])
    report = agg.reports.report(project, f"{run_id}-pr")
    assert report.baseline["run_id"] == f"{run_id}-main" and round(report.counts.worst_regression, 2) == 0.3
