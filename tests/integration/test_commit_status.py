"""Commit statuses on GitHub (optional): quiet until the first shard, pending, then the outcome."""

from dataclasses import replace

import pytest

from codspeed_aggregator.adapters.github_status import GitHubStatuses
from codspeed_aggregator.domain.notification import commit_status
from codspeed_wire.api import CloseRequest, ShardUploadRequest
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
    first = _push(agg, project, run_id, "1", bundle())
    assert github.statuses == []  # quiet until a shard arrives
    agg.record_arrival.record(first)
    agg.record_arrival.record(_push(agg, project, run_id, "2", bundle()))
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
        "3 regressions past 5% (worst +30.0%); forwarded 3/3 shards",
    )
    improved = BenchmarkCounts(measured=20, improvements=4, unchanged=16, worst_improvement=-0.2)
    assert commit_status(_report("forwarded", 3, [], counts=improved)) == ("success", "forwarded 3/3 shards")
    assert commit_status(_report("open", 2, [], counts=regressed)) == ("pending", "2/3 shards in")  # gated once final
