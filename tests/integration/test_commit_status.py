"""Commit statuses on GitHub (optional): quiet until the first shard, pending, then the outcome."""

from dataclasses import replace

import pytest

from codspeed_aggregator.adapters.github_status import GitHubStatuses
from codspeed_aggregator.domain.notification import commit_status
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_wire.markdown import render_markdown
from codspeed_wire.report import BenchmarkCounts, Report, ShardEntry
from tests.factories import COMMIT, bundle, put, upload_request
from tests.fake_github import FakeGitHub


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


def _push(agg, project, run_id, shard, data, total=2) -> str:
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, total=total))
    )
    put(grant.model_dump(), data)
    return grant.key


def test_statuses_go_pending_then_success_over_real_http_and_link_the_run_page(isolated, github, project, run_id):
    agg = replace(
        isolated.aggregator,
        statuses=GitHubStatuses(github.url, "gh-token"),
        page_key=b"k" * 32,
        settings=replace(isolated.aggregator.settings, public_url="https://agg.example"),
    )
    first = _push(agg, project, run_id, "1", bundle(4301, ["a::one"]))
    assert github.statuses == []  # quiet until a shard arrives
    agg.record_arrival.record(first)
    agg.record_arrival.record(_push(agg, project, run_id, "2", bundle(4302, ["b::two"])))
    agg.finalize_run.finalize(project, run_id)
    assert [(s["state"], s["description"]) for s in github.statuses] == [
        ("pending", "1/2 shards in"),
        ("pending", "2/2 shards in"),
        ("pending", "2/2 shards in: finishing, what is not upstream yet going now"),
        ("success", "forwarded 2/2 shards"),
    ]
    assert {s["path"] for s in github.statuses} == {f"/repos/{project}/statuses/{COMMIT}"}
    assert {s["authorization"] for s in github.statuses} == {"Bearer gh-token"}
    assert {s["context"] for s in github.statuses} == {"codspeed/shards"}
    assert all(
        s["target_url"].startswith(f"https://agg.example/runs/{project}/{run_id}?expires=") for s in github.statuses
    )


def test_a_failing_github_never_fails_an_arrival_or_a_forward(isolated, github, project, run_id):
    github.fail_with = 500
    agg = replace(isolated.aggregator, statuses=GitHubStatuses(github.url, "gh-token"))
    assert agg.record_arrival.record(_push(agg, project, run_id, "1", bundle())) == "recorded"
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert len(github.statuses) >= 2


def _report(state, arrived, shards, **fields):
    return Report(
        project="a/b",
        run_id="1",
        commit="c",
        state=state,
        partial=state == "open",
        version=1,
        expected=3,
        arrived=arrived,
        carried=sum(s == "carried" for _, s in shards),
        shards=[ShardEntry(name=n, state=s) for n, s in shards],
        generated_at="t",
        **fields,
    )


def test_what_the_status_says():
    assert commit_status(_report("open", 0, [("1", "expected")])) is None
    assert commit_status(_report("open", 2, [])) == ("pending", "2/3 shards in")
    assert commit_status(_report("forwarded", 3, [])) == ("success", "forwarded 3/3 shards")
    assert commit_status(_report("forwarded", 2, [("3", "missing")])) == ("failure", "forwarded 2/3 shards; missing: 3")
    # a carried shard is done: "forwarded 1/3 shards" said two of three were not
    assert commit_status(_report("forwarded", 1, [("1", "arrived"), ("2", "carried"), ("3", "carried")])) == (
        "success",
        "forwarded 3/3 shards (1 measured, 2 carried)",
    )
    assert commit_status(_report("forwarded", 1, [("2", "carried"), ("3", "missing")])) == (
        "failure",
        "forwarded 2/3 shards (1 measured, 1 carried); missing: 3",
    )
    assert commit_status(_report("forward_failed", 3, []))[0] == "failure"
    assert commit_status(_report("closed_empty", 0, []))[0] == "failure"


def test_a_forwarded_run_with_regressions_past_the_threshold_fails_its_status_with_the_reason():
    regressed = BenchmarkCounts(measured=20, regressions=3, improvements=1, unchanged=16, worst_regression=0.3)
    assert commit_status(_report("forwarded", 3, [], counts=regressed, threshold=0.05)) == (
        "failure",
        "forwarded 3/3 shards; 3 regressions past 5% (worst +30.0%)",
    )
    improved = BenchmarkCounts(measured=20, improvements=4, unchanged=16, worst_improvement=-0.2)
    assert commit_status(_report("forwarded", 3, [], counts=improved)) == ("success", "forwarded 3/3 shards")
    assert commit_status(_report("open", 2, [], counts=regressed)) == ("pending", "2/3 shards in")  # gated once final
    # a crashed job no longer hides the regressions: every reason at once, in the order they matter
    assert commit_status(_report("forwarded", 2, [("4", "missing")], counts=regressed, threshold=0.05)) == (
        "failure",
        "forwarded 2/3 shards; missing: 4; 3 regressions past 5% (worst +30.0%)",
    )
    many = [(f"benchmarks [shard {i}, job {i}/40]", "missing") for i in range(10)]
    said = commit_status(_report("forwarded", 2, many, counts=regressed, threshold=0.05))[1]
    assert said == "forwarded 2/3 shards; 10 shards missing; 3 regressions past 5% (worst +30.0%)"  # under 140


def _runner_pull_request(agg, project: str, run_id: str, merge: str) -> None:
    """CodSpeed's runner in a pull request's job: it says only the commit it checked out, GitHub's merge commit."""
    from tests import runner

    archive = runner.recorded(1)
    sent = runner.github_job(
        project,
        run_id,
        archive,
        merge,
        ref="refs/pull/7/merge",
        head_ref="feature",
        base_ref="main",
        event="pull_request",
    )
    from codspeed_wire.upstream import UploadMetadata

    accepted = agg.runner_upload.accept(UploadMetadata.model_validate(sent))
    from urllib.parse import unquote, urlsplit

    import requests

    headers = {"Content-MD5": sent["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
    assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
    agg.record_arrival.record(unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2]))


def test_a_runner_pull_requests_status_goes_on_its_head_which_githubs_merge_commit_names(
    isolated, github, project, run_id
):
    """GitHub shows no status posted on its test merge commit: the status goes on the head, the merge
    commit's second parent, asked of GitHub once; the report shows the head too."""
    base, head, merge = "1" * 40, "2" * 40, "3" * 40
    github.commits.update({base: [], head: [base], merge: [base, head]})
    agg = replace(isolated.aggregator, statuses=GitHubStatuses(github.url, "gh-token"))
    _runner_pull_request(agg, project, run_id, merge)
    assert {s["path"] for s in github.statuses} == {f"/repos/{project}/statuses/{head}"}
    report = agg.reports.report(project, run_id)
    assert (report.commit, report.head_commit) == (merge, head)
    assert github.reads.count(f"/repos/{project}/commits/{merge}") == 1


def test_a_status_whose_head_github_cannot_say_is_not_posted_on_the_merge_commit(isolated, github, project, run_id):
    github.fail_with = 500  # every GitHub call fails: the head stays unknown, and is asked again next time
    agg = replace(isolated.aggregator, statuses=GitHubStatuses(github.url, "gh-token"))
    _runner_pull_request(agg, project, run_id, "3" * 40)
    assert github.statuses == []  # never on the merge commit, where no reviewer would see it
    assert agg.reports.report(project, run_id).head_commit is None


def test_shards_that_measure_the_same_benchmarks_are_named_at_the_close_and_fail_the_status(
    isolated, github, project, run_id
):
    """Three shards of a job that forgot its filter all exited 0, the report said "9 new", and each
    benchmark went upstream three times, unnoticed."""
    agg = replace(isolated.aggregator, statuses=GitHubStatuses(github.url, "gh-token"))
    same = ["tests/a.py::one", "tests/a.py::two", "tests/a.py::three"]
    for shard in ("1", "2", "3"):
        agg.record_arrival.record(_push(agg, project, run_id, shard, bundle(benchmarks=same), total=3))
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert report.overlaps_total == 3
    assert [(o.benchmark, o.shards) for o in report.overlaps] == [(b, ["1", "2", "3"]) for b in sorted(same)]
    said = "Measured in more than one shard (3): tests/a.py\\:\\:one (valgrind) in 1, 2, 3"  # made inert in Markdown
    assert said in render_markdown(report)
    assert (github.statuses[-1]["state"], github.statuses[-1]["description"]) == (
        "failure",
        "forwarded 3/3 shards; 3 benchmarks measured in two shards",
    )
