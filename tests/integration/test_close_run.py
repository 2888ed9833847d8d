"""Closing a run: by hand, with nothing in, and at its deadline. Against moto's server (real HTTP, real
boto3, real presigned URLs), driven step by step."""

import time
from dataclasses import replace
from urllib.parse import unquote, urlsplit

import pytest
import requests

from codspeed_aggregator.domain.errors import AttemptEnded
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
    assert (project, run_id) not in agg.sweep_deadlines.sweep()
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, run_id) in late.sweep_deadlines.sweep()
    assert {"project": project, "run_id": run_id, "reason": "deadline"} in isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "missing"
    assert (project, run_id) not in late.sweep_deadlines.sweep()


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
    assert (project, f"{run_id}~2") in late.sweep_deadlines.sweep()  # shard 3 never comes: the deadline closes it
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


def test_a_close_waits_for_an_upload_it_cannot_tell_as_its_own_and_counts_it_in_the_same_attempt(
    isolated, clocked, project, run_id
):
    """A close from outside the CI (no CI run said), then a PUT granted before it, then its S3 event
    seconds later: the close waits for it, its arrival asks the finalize again, one attempt holds both."""
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["a::one"]), total=3)["key"])
    data = bundle(4243, ["b::two"])
    straggler = grant(agg, project, run_id, "2", data, total=3)  # shard 3 never asks
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    report = agg.reports.report(project, run_id)  # asked again at the URL's expiry at the latest
    assert report.state == "open" and report.closing.startswith("closing: waiting for shard 2's upload")
    put(straggler, data)
    clock.now += 3  # its event, seconds after the PUT
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # in the bucket, its event not yet come
    assert agg.record_arrival.record(straggler["key"]) == "recorded"
    asked = [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    assert {"project": project, "run_id": run_id, "reason": "arrival"} in asked  # the arrival asks again
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    states = [s.state for s in report.shards]
    assert (report.attempt, report.arrived, states) == (1, 2, ["arrived", "arrived", "missing"])
    assert agg.ledger.runs.run_record(project, f"{run_id}~2") is None  # one CI attempt, one aggregator attempt


def test_a_crashed_job_of_the_closing_ci_run_is_missing_at_once(isolated, clocked, project, run_id):
    """The gate's close says the jobs of CI run 7001 (attempt 1) ended: the job that asked for an upload
    and crashed before its PUT is missing now, not when its URL expires 600 s later."""
    agg, _ = clocked
    origin = {"ci_run": "7001", "ci_attempt": 1}
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["a::one"]), total=2, **origin)["key"])
    grant(agg, project, run_id, "2", bundle(4243), total=2, **origin)  # its job died after the POST
    answer = agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001", ci_attempt=1))
    assert "a job of CI run 7001 (attempt 1) with no bundle in the bucket is missing now" in answer.message
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert not _barrier_messages(isolated, run_id)
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards} == {"1": "arrived", "2": "missing"}


def test_a_close_of_one_ci_run_waits_for_another_workflows_grant_while_its_url_is_good(
    isolated, clocked, project, run_id
):
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001")["key"])
    grant(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7002")  # another workflow, same --run-id
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001", ci_attempt=1))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    report = agg.reports.report(project, run_id)
    assert report.closing.startswith("closing: waiting for shard 2's upload, whose URL was handed out before the close")
    clock.now += agg.settings.presign_expiry_seconds + 1
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert agg.reports.report(project, run_id).closing is None


def test_a_bundle_in_the_bucket_whose_event_never_comes_is_counted_by_the_close_at_its_backstop(
    isolated, clocked, project, run_id
):
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001")["key"])
    push(agg, project, run_id, "2", bundle(4243, ["b::two"]), total=2, ci_run="7001")  # its event never comes
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001"))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # in the bucket: awaited, not missing
    said = agg.reports.report(project, run_id).closing
    assert said.startswith("closing: waiting for shard 2's bundle, in the bucket since ") and "to be counted" in said
    clock.now = time.time() + 60 + agg.settings.arrival_reserve(1 << 20) + 2  # past its backstop, sized to its bundle
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # the close counted it itself
    report = agg.reports.report(project, run_id)
    assert (report.attempt, report.arrived) == (1, 2)


def test_a_bundle_whose_arrival_fails_at_the_backstop_too_is_missing_with_why_and_kept(
    isolated, clocked, project, run_id, monkeypatch
):
    agg, clock = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001")["key"])
    kept = push(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7001")
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001"))
    clock.now = time.time() + 60 + agg.settings.arrival_reserve(1 << 20) + 2

    def failing(*args, **kwargs):
        raise RuntimeError("the results store is down")

    monkeypatch.setattr(agg.finalize_run.barrier.arrivals, "record", failing)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    shard = {s.name: s for s in agg.reports.report(project, run_id).shards}["2"]
    assert shard.state == "missing" and shard.reason.startswith("in the bucket since ")
    assert "its arrival failed (RuntimeError: the results store is down): redrive" in shard.reason
    assert agg.store.s3.head_object(Bucket=agg.store.bucket, Key=kept["key"])  # nothing lost


def test_a_grant_of_the_closing_ci_attempt_asked_after_its_close_joins_it_and_never_holds_it(
    isolated, clocked, project, run_id
):
    """The gate's close says CI run 7001's attempt 1 ended: a grant of that CI attempt asked after it (a
    job the gate did not wait for) opens no attempt; with nothing in the bucket it is missing at once."""
    agg, _ = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001", ci_attempt=1)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001", ci_attempt=1))
    later = grant(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7001", ci_attempt=1)
    assert later["run_id"] == run_id and later["attempt"] == 1
    assert agg.ledger.runs.run_record(project, run_id).grants == 2
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "missing"
    assert agg.ledger.runs.run_record(project, f"{run_id}~2") is None


def test_a_grant_of_no_known_ci_attempt_after_the_close_goes_to_the_next_attempt_and_never_holds_the_close(
    isolated, clocked, project, run_id
):
    """A static token's runner job says no CI attempt: what it asks after a close is a later job's."""
    agg, _ = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001")["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001", ci_attempt=1))
    later = grant(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7001")
    assert later["run_id"] == f"{run_id}~2"
    assert agg.ledger.runs.run_record(project, run_id).grants == 1  # the closing run counted nothing more
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"


def test_an_upload_of_a_ci_attempt_whose_run_ended_opens_no_attempt_and_says_to_re_run_it(
    isolated, clocked, project, run_id
):
    agg, _ = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2, ci_run="7001", ci_attempt=1)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, ci_run="7001", ci_attempt=1))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    before = agg.ledger.reads.snapshot(project, run_id)
    with pytest.raises(AttemptEnded) as refused:
        grant(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7001", ci_attempt=1)
    assert str(refused.value) == (
        f"run {run_id} of {project} was CI attempt 1's, and it ended (forwarded) before this upload of CI attempt 1 "
        "was asked: its job came too late for it. Re-run the job: the CI's next attempt opens the run's next attempt"
    )
    assert refused.value.status == 409
    assert agg.ledger.reads.snapshot(project, run_id) == before  # nothing changed
    assert agg.ledger.runs.run_record(project, f"{run_id}~2") is None
    again = grant(agg, project, run_id, "2", bundle(4243), total=2, ci_run="7001", ci_attempt=2)  # the re-run
    assert again["run_id"] == f"{run_id}~2"


def test_a_runner_post_after_the_close_goes_to_the_next_attempt_with_200(isolated, clocked, project, run_id):
    """The runner retries only 5xx, 408 and 429, a few times: a 409 "is closing" would fail its job."""
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
        accepted = agg.runner_upload.accept(UploadMetadata.model_validate(sent))
        return accepted, archive, sent

    first = job(0)
    agg.close_run.close(CloseRequest(project=project, run_id=workflow))
    second = job(1)  # after the close: the next attempt's
    assert (first[0].runId, second[0].runId) == (workflow, f"{workflow}~2")
    assert agg.finalize_run.finalize(project, workflow) == "waiting"  # the first one's URL is good
    for accepted, archive, sent in (first, second):
        headers = {"Content-MD5": sent["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
        assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
        assert agg.record_arrival.record(unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2])) == "recorded"
    assert agg.finalize_run.finalize(project, workflow) == "forwarded"
    assert agg.reports.report(project, workflow).arrived == 1
    assert agg.ledger.reads.snapshot(project, f"{workflow}~2").run.arrived_count == 1  # its own job


def test_a_grant_whose_count_fails_leaves_nothing_a_close_waits_for(isolated, clocked, project, run_id):
    """Its count throttled, the caller gets no URL (a 503 it retries), and no upload item was written."""
    from botocore.exceptions import ClientError

    agg, _ = clocked
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    closes = agg.ledger.closes
    count = closes.count_grant

    def throttled(*args, **kwargs):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")

    closes.count_grant = throttled
    try:
        with pytest.raises(ClientError):
            grant(agg, project, run_id, "2", bundle(4243), total=2)
    finally:
        closes.count_grant = count
    assert [g.shard for g in agg.ledger.reads.barrier_view(project, run_id).grants] == ["1"]
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # nothing to wait for


def test_a_late_webhook_of_an_earlier_ci_attempt_closes_nothing_a_later_one_opened(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=2, ci_attempt=1)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    again = push(agg, project, run_id, "1", bundle(4242, ["t1::b"]), total=2, ci_attempt=2)  # "re-run all jobs"
    assert again["run_id"] == f"{run_id}~2"
    assert agg.close_run.close_finished_ci_run(project, run_id, ci_attempt=1) == []  # redelivered, late
    assert agg.ledger.runs.run_record(project, f"{run_id}~2").close.requested is False
    assert agg.close_run.close_finished_ci_run(project, run_id, ci_attempt=2) == [f"{run_id}~2"]
    assert agg.ledger.runs.run_record(project, f"{run_id}~2").close.by.attempt == 2
