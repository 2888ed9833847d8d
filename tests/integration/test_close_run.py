"""Closing a run: by hand, with nothing in, and at its deadline. Against moto's server (real HTTP, real
boto3, real presigned URLs), driven step by step."""

import time
from dataclasses import replace
from urllib.parse import unquote, urlsplit

import pytest
import requests

from codspeed_wire.api import CloseRequest
from tests.factories import Clock, bundle, grant, push, put


def _barrier_messages(isolated, run_id: str) -> list[dict]:
    """The finalize messages a waiting close asked for (delayed: read past their delay)."""
    time.sleep(1.1)
    return [m for m in isolated.finalize_requests() if m["run_id"] == run_id and m["reason"] == "barrier"]


@pytest.fixture
def clocked(isolated):
    clock = Clock()
    return replace(isolated.aggregator, clock=clock), clock


def test_close_finishes_with_what_arrived_and_names_missing_and_skipped_shards(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=3)["key"])
    answer = agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert answer.state == "closing"
    assert agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert {s.name: s.state for s in report.shards} == {"1": "arrived", "2": "missing", "3": "skipped"}
    assert (
        agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message
        == "run is already forwarded: nothing to close"
    )


def test_a_run_closed_with_nothing_arrived_ends_empty_and_forwards_nothing(isolated, clocked, project, run_id):
    agg, clock = clocked
    grant(agg, project, run_id, "1", bundle(), total=2)  # granted, never sent
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    clock.now += agg.settings.presign_expiry_seconds + 1
    assert agg.finalize_run.finalize(project, run_id) == "closed_empty"
    assert agg.reports.report(project, run_id).state == "closed_empty" and not isolated.upstream.uploads(run_id)


@pytest.mark.slow
def test_the_sweeper_closes_runs_past_their_deadline(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    isolated.finalize_requests()
    assert (project, run_id) not in agg.close_run.sweep()
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, run_id) in late.close_run.sweep()
    assert {"project": project, "run_id": run_id, "reason": "deadline"} in isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "missing"
    assert (project, run_id) not in late.close_run.sweep()


@pytest.mark.slow
def test_the_next_attempt_keeps_the_skip_list_so_its_deadline_reports_the_skip_not_a_loss(isolated, project, run_id):
    agg = isolated.aggregator
    for name in ("1", "2"):
        agg.record_arrival.record(push(agg, project, run_id, name, bundle(4242, [f"t{name}::a"]), total=3)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    again = push(agg, project, run_id, "2", bundle(4242, ["t2::b"]), total=3)  # a re-run of job 2
    assert agg.record_arrival.record(again["key"]) == "recorded" and again["run_id"] == f"{run_id}~2"
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, f"{run_id}~2") in late.close_run.sweep()  # shard 3 never comes: the deadline closes it
    assert agg.finalize_run.finalize(project, f"{run_id}~2") == "forwarded"
    report = agg.reports.report(project, run_id)
    assert report.run_id == f"{run_id}~2" and {s.name: s.state for s in report.shards}["3"] == "skipped"


def test_close_and_the_ci_webhook_act_on_the_latest_attempt_and_a_named_one_on_that_one(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=2)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    # attempt 2, open
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::b"]), total=2)["key"])
    named = agg.close_run.close(CloseRequest(project=project, run_id=f"{run_id}~1"))
    assert (named.run_id, named.state, named.message) == (
        run_id,
        "forwarded",
        "run is already forwarded: nothing to close",
    )
    assert agg.close_run.close_finished_ci_run(project, run_id) == [f"{run_id}~2"]
    assert agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"


def test_a_close_waits_for_an_upload_granted_before_it_and_counts_it_in_the_same_attempt(
    isolated, clocked, project, run_id, monkeypatch
):
    """A runner's POST answered, then the gate's close at once, then its PUT (on AWS its S3 event comes
    seconds later still): the close waits for it. It was finalized without it before (1 of 3 in, a late
    arrival in a second attempt, a commit status that failed and then passed)."""
    from codspeed_aggregator.use_cases import finalize_run

    monkeypatch.setattr(finalize_run, "BARRIER_POLL_SECONDS", 1)
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["a::one"]), total=2)["key"])
    data = bundle(4243, ["b::two"])
    straggler = grant(agg, project, run_id, "2", data, total=2)
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    assert _barrier_messages(isolated, run_id)  # asked again shortly, not dropped
    assert agg.reports.report(project, run_id).state == "open"
    put(straggler, data)
    clock.now += 3  # its event, seconds after the PUT
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # in the bucket, its event not yet come
    assert agg.record_arrival.record(straggler["key"]) == "recorded"
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert (report.attempt, report.arrived, [s.state for s in report.shards]) == (1, 2, ["arrived", "arrived"])
    assert agg.ledger.runs.run_record(project, f"{run_id}~2") is None  # one CI attempt, one aggregator attempt


def test_a_close_goes_on_without_an_upload_whose_url_expired_with_nothing_sent(isolated, clocked, project, run_id):
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    grant(agg, project, run_id, "2", bundle(4243), total=2)  # its job died after the POST
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    clock.now += agg.settings.presign_expiry_seconds + 1  # its URL expired, and nothing is in the bucket
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards} == {"1": "arrived", "2": "missing"}


def test_a_bundle_in_the_bucket_is_awaited_past_its_url_for_its_event_but_not_forever(
    isolated, clocked, project, run_id
):
    from codspeed_aggregator.domain.barrier import EVENT_GRACE_SECONDS

    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    push(agg, project, run_id, "2", bundle(4243), total=2)  # in the bucket; its event never comes
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    clock.now += agg.settings.presign_expiry_seconds + 1
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    clock.now += EVENT_GRACE_SECONDS
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # no run waits forever (invariant 6)


def test_a_runner_post_while_the_run_is_closing_joins_it_and_the_close_waits_for_it(isolated, clocked, project, run_id):
    """The runner retries only 5xx, 408 and 429, a few times: a 409 "is closing" failed its job."""
    from codspeed_wire.upstream import UploadMetadata
    from tests import runner

    agg, _ = clocked
    owner, repository = project.rsplit("/", 1)
    workflow = run_id.replace("-", "")[:12]

    def job(index: int) -> tuple:
        archive = runner.folder_archive(runner.valgrind_folder(7000 + index, [f"late::s{index}"]), gzipped=True)
        part = runner.github_run_part(workflow, "bench", "valgrind", matrix={"s": index}, job_index=index, job_total=2)
        sent = runner.metadata(
            archive, executor="valgrind", owner=owner, repository=repository, commit="a" * 40, run_part=part
        )
        accepted = agg.request_upload.accept_drop_in(UploadMetadata.model_validate(sent))
        assert accepted.runId == workflow  # the run itself, never a next attempt
        return accepted, archive, sent

    first = job(0)
    agg.close_run.close(CloseRequest(project=project, run_id=workflow))
    second = job(1)  # after the close: joins the closing run
    assert agg.finalize_run.finalize(project, workflow) == "waiting"
    for accepted, archive, sent in (first, second):
        headers = {"Content-MD5": sent["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
        assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
        assert agg.record_arrival.record(unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2])) == "recorded"
    assert agg.finalize_run.finalize(project, workflow) == "forwarded"
    assert agg.reports.report(project, workflow).arrived == 2


def test_a_grant_between_the_barrier_and_the_claim_moves_the_count_and_the_close_waits_for_it(
    isolated, clocked, project, run_id, monkeypatch
):
    """The barrier lists the grants, then claims at the count it read first: an upload granted in
    between makes the claim fail, and the close waits for that one too."""
    agg, _ = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    reads = agg.ledger.reads
    read = reads.barrier_view

    def then_a_grant(*args, **kwargs):
        found = read(*args, **kwargs)
        grant(agg, project, run_id, "2", bundle(4243), total=2)
        return found

    monkeypatch.setattr(reads, "barrier_view", then_a_grant)
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    monkeypatch.setattr(reads, "barrier_view", read)
    assert agg.ledger.runs.run_record(project, run_id).state == "open"  # not claimed
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # shard 2's URL is good: awaited
