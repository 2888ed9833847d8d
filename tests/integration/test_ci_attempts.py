"""Attempts in the CI's own numbers: an aggregator attempt is a CI attempt, learned from what the CI
vouches for (a job's OIDC claim, GitHub's answer for a fork's run, the CI's webhook), never inferred
from who asks after a close; a caller without a token adds its own shards and ends nobody's wait.
Against moto's server, driven step by step, GitHub played by its fake on loopback."""

import json
from urllib.parse import unquote, urlsplit

import pytest
import requests

from codspeed_aggregator.domain.attempts import attempt_run_id
from codspeed_wire.api import CloseRequest
from codspeed_wire.upstream import UploadMetadata
from tests import runner
from tests.factories import bundle, footprint, push, put
from tests.fork_pull_request import call, upload
from tests.requests_seen import dynamodb_requests, whole_run_reads

GATE = "GitHub Actions 9"  # the runner the fork's gate job runs on (RUNNER_NAME), as GitHub lists it


def _jobs(github, run_id: str, attempt: int, running: tuple[str, ...] = (), gate_running: bool = True) -> None:
    """GitHub's list of the attempt's jobs: two benchmark jobs (``running`` still in progress) and the gate."""
    github.jobs[(run_id, attempt)] = [
        *((f"bench ({n})", f"GitHub Actions {n}", "in_progress" if n in running else "completed") for n in ("1", "2")),
        ("gate", GATE, "in_progress" if gate_running else "completed"),
    ]


def _close(agg, project: str, run_id: str, attempt: int = 1, job: str | None = GATE) -> tuple[int, dict]:
    body = {"project": project, "run_id": run_id, "ci_run": run_id, "ci_attempt": attempt}
    return call(agg, "POST", "/v1/runs/close", body | ({"ci_job": job} if job else {}))


def _states(agg, project: str, run_id: str) -> dict[str, str]:
    return {s.name: s.state for s in agg.reports.report(project, run_id).shards}


def test_a_strangers_grant_naming_no_ci_run_is_the_vouched_attempts_and_never_holds_the_gates_close(
    isolated, github, fork
):
    """A stranger asks for shard 2 with the fork run's public facts and no ``ci_run``, and never PUTs: the
    grant is GitHub's Actions run and attempt all the same, so the fork's gate, once GitHub lists every
    other job as ended, ends the run at once with shard 2 missing (before: open for the URL's 600 s)."""
    agg, project, run_id = fork
    request, data = upload(project, run_id, "1")
    status, granted = call(agg, "POST", "/v1/uploads", request | {"ci_run": run_id, "ci_attempt": 1})
    assert status == 201, granted
    put(granted, data)
    assert agg.record_arrival.record(granted["key"]) == "recorded"
    stranger, _ = upload(project, run_id, "2")
    assert "ci_run" not in stranger and call(agg, "POST", "/v1/uploads", stranger)[0] == 201
    _jobs(github, run_id, 1)
    status, closed = _close(agg, project, run_id)
    assert status == 202, closed
    assert agg.ledger.runs.run_record(project, run_id).close.by.run == run_id
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"  # the clock never moved
    assert _states(agg, project, run_id) == {"1": "arrived", "2": "missing"}


def test_a_strangers_closes_while_the_jobs_run_are_refused_change_nothing_and_use_no_attempt(isolated, github, fork):
    """24 grant-and-close pairs by a stranger on a fork run in progress (each bundle PUT, the worst
    case): every close is refused while GitHub lists the run's jobs as running, nothing it did opened an
    attempt; the contributor's next job counts, and the run's re-run (GitHub's attempt 2) is attempt 2."""
    agg, project, run_id = fork
    _jobs(github, run_id, 1, running=("1", "2"))
    refusal = (
        "GitHub lists job 'bench (1)' and 1 more of that attempt as still running: a close without a token is "
        "taken once every job of its attempt but the closing one has ended (a gate runs after the jobs it needs)"
    )
    for turn in range(24):
        request, data = upload(project, run_id, "1")
        status, granted = call(agg, "POST", "/v1/uploads", request)
        assert (status, granted["run_id"]) == (201, run_id), granted
        put(granted, data)
        agg.record_arrival.record(granted["key"])
        before = footprint(isolated, project, run_id) if turn == 23 else None
        for job in (GATE, "GitHub Actions 1", None):  # the gate's runner, a bench job's, or none said
            status, answer = _close(agg, project, run_id, job=job)
            assert status == 409, answer
        assert answer["error"].startswith("a close without a token names its Actions run")
    assert _close(agg, project, run_id)[1] == {"error": refusal}
    assert footprint(isolated, project, run_id) == before  # the last refusals changed nothing
    assert agg.ledger.runs.run_record(project, attempt_run_id(run_id, 2)) is None
    request, data = upload(project, run_id, "2")  # the contributor's next job
    status, granted = call(agg, "POST", "/v1/uploads", request | {"ci_run": run_id, "ci_attempt": 1})
    put(granted, data)
    assert agg.record_arrival.record(granted["key"]) == "recorded" and granted["run_id"] == run_id
    _jobs(github, run_id, 1)  # the benchmark jobs ended: the gate's close is taken, however many were refused
    assert _close(agg, project, run_id)[0] == 202
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    github.run_attempts[run_id] = 2  # "re-run all jobs": GitHub's latest attempt, whatever the request says
    agg.clock.now += 61  # past the minute GitHub's word on the claim is kept
    request, data = upload(project, run_id, "1")
    status, granted = call(agg, "POST", "/v1/uploads", request | {"ci_run": run_id, "ci_attempt": 1})
    assert (status, granted["run_id"], granted["attempt"]) == (201, attempt_run_id(run_id, 2), 2), granted
    assert agg.ledger.runs.run_record(project, attempt_run_id(run_id, 2)).attempt.ci == 2


def test_a_re_run_begun_within_the_minute_github_s_word_is_kept_is_asked_again_not_refused(isolated, github, fork):
    """GitHub's answer for the claim is kept a minute; a re-run's first job within it would read attempt 1,
    whose run ended: GitHub is asked again, and the job goes to attempt 2."""
    agg, project, run_id = fork
    request, data = upload(project, run_id, "1")
    status, granted = call(agg, "POST", "/v1/uploads", request)
    put(granted, data)
    agg.record_arrival.record(granted["key"])
    _jobs(github, run_id, 1)
    assert _close(agg, project, run_id)[0] == 202
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    github.run_attempts[run_id] = 2
    reads = len(github.reads)
    status, granted = call(agg, "POST", "/v1/uploads", upload(project, run_id, "2")[0])
    assert (status, granted["run_id"]) == (201, attempt_run_id(run_id, 2)), granted
    assert github.reads[reads:].count(f"/repos/{project}/actions/runs/{run_id}") == 1  # asked again, once


def test_a_close_while_a_job_uploads_waits_for_it_and_once_github_lists_it_ended_a_job_that_never_put_is_missing(
    isolated, github, fork
):
    agg, project, run_id = fork
    slow, slow_data = upload(project, run_id, "1")
    status, slow_grant = call(agg, "POST", "/v1/uploads", slow | {"ci_run": run_id, "ci_attempt": 1})
    _jobs(github, run_id, 1, running=("1",))  # its job's PUT is slow: GitHub lists it running
    assert _close(agg, project, run_id)[0] == 409
    put(slow_grant, slow_data)
    assert agg.record_arrival.record(slow_grant["key"]) == "recorded"
    crashed, _ = upload(project, run_id, "2")
    assert call(agg, "POST", "/v1/uploads", crashed | {"ci_run": run_id, "ci_attempt": 1})[0] == 201
    _jobs(github, run_id, 1)  # both ended; job 2 crashed after its grant
    assert _close(agg, project, run_id)[0] == 202
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    assert _states(agg, project, run_id) == {"1": "arrived", "2": "missing"}
    assert agg.reports.report(project, run_id).attempt == 1


# -- a static token's runner jobs: the CI says no attempt in their uploads ---------------------------------


def _runner_job(agg, project: str, workflow: str, index: int, total: int, tag: str) -> str:
    """One job of a matrix of CodSpeed runners with a static token: its POST, PUT and arrival. Its run id."""
    owner, repository = project.rsplit("/", 1)
    archive = runner.folder_archive(runner.valgrind_folder(7000 + index, [f"m::s{index}_{tag}"]), gzipped=True)
    part = runner.github_run_part(workflow, "bench", "valgrind", matrix={"s": index}, job_index=index, job_total=total)
    sent = runner.metadata(
        archive, executor="valgrind", owner=owner, repository=repository, commit="a" * 40, run_part=part
    )
    accepted = agg.runner_upload.accept(UploadMetadata.model_validate(sent))
    headers = {"Content-MD5": sent["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
    assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
    assert agg.record_arrival.record(unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2])) == "recorded"
    return accepted.runId


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [21, 60])
def test_a_static_token_matrix_re_run_all_then_re_run_failed_is_one_attempt_per_ci_attempt(isolated, project, jobs):
    """Before: attempt 2 of 21 jobs went to 19 aggregator attempts and job 21 was refused 409."""
    agg = isolated.aggregator
    workflow = str(9_100_000_000 + jobs)
    close = agg.close_run.close_finished_ci_run
    assert {_runner_job(agg, project, workflow, i, jobs, "a") for i in range(jobs)} == {workflow}
    assert close(project, workflow, ci_attempt=1) == [workflow]  # the webhook: CI attempt 1 ended
    assert isolated.finalize_all(project, workflow) == "forwarded"
    second = attempt_run_id(workflow, 2)
    assert {_runner_job(agg, project, workflow, i, jobs, "b") for i in range(jobs)} == {second}  # re-run all
    assert close(project, workflow, ci_attempt=1) == []  # attempt 1's webhook replayed: nothing of attempt 2
    snapshot = agg.ledger.reads.snapshot(project, second)
    assert snapshot.run.arrived_count == jobs and not [s for s in snapshot.arrived().values() if s.inherited_from]
    assert isolated.finalize_all(project, second) == "forwarded"  # complete: every job re-ran
    assert close(project, workflow, ci_attempt=2) == []  # its webhook, once it ended: noted, nothing to close
    third = attempt_run_id(workflow, 3)
    assert {_runner_job(agg, project, workflow, i, jobs, "c") for i in (0, 4, 7)} == {third}  # re-run failed
    assert agg.ledger.runs.run_record(project, third).state == "open"  # 3 of its jobs: not complete by count
    assert close(project, workflow, ci_attempt=2) == []  # attempt 2's, replayed: nothing of attempt 3
    assert close(project, workflow, ci_attempt=3) == [third]
    assert isolated.finalize_all(project, third) == "forwarded"
    assert agg.ledger.runs.run_record(project, attempt_run_id(workflow, 4)) is None
    report = agg.reports.report(project, workflow)
    assert (report.attempt, report.arrived) == (3, jobs)


def test_an_arrival_in_a_re_run_complete_by_count_reads_neither_attempt_whole(isolated, project):
    """Before: each arrival of a next attempt complete by count (its inherited shards) read it and the
    attempt before whole, to tell a re-run of all jobs: a 60-job re-run read 120 whole runs."""
    agg, workflow, jobs = isolated.aggregator, "9100000777", 6
    for i in range(jobs):
        _runner_job(agg, project, workflow, i, jobs, "a")
    assert agg.close_run.close_finished_ci_run(project, workflow, ci_attempt=1) == [workflow]
    assert isolated.finalize_all(project, workflow) == "forwarded"
    second = _runner_job(agg, project, workflow, 0, jobs, "b")  # opens attempt 2 with the others inherited
    for i in range(1, jobs):
        with dynamodb_requests(agg.ledger.db) as seen:
            _runner_job(agg, project, workflow, i, jobs, "b")
        assert whole_run_reads(seen) == 0, f"job {i}"
    assert isolated.finalize_all(project, second) == "forwarded"  # every job re-ran: complete, as before
    assert agg.reports.report(project, workflow).arrived == jobs


def test_a_webhook_closes_an_attempt_a_late_job_of_its_ci_attempt_opened_and_no_later_one(isolated, project):
    """Attempt 1 complete by count before its webhook: a late job of CI attempt 1 (another group) opens
    attempt 2, which attempt 1's webhook then closes; once noted, a replay of it closes no later attempt."""
    agg = isolated.aggregator
    workflow = "9200000001"
    close = agg.close_run.close_finished_ci_run
    _runner_job(agg, project, workflow, 0, 2, "a")
    _runner_job(agg, project, workflow, 1, 2, "a")
    assert isolated.finalize_all(project, workflow) == "forwarded"  # complete by count: no webhook yet
    assert _runner_job(agg, project, workflow, 1, 2, "b") == attempt_run_id(workflow, 2)
    assert close(project, workflow, ci_attempt=1) == [attempt_run_id(workflow, 2)]
    assert isolated.finalize_all(project, attempt_run_id(workflow, 2)) == "forwarded"
    assert _runner_job(agg, project, workflow, 0, 2, "c") == attempt_run_id(workflow, 3)  # CI attempt 2's
    assert close(project, workflow, ci_attempt=1) == []  # replayed
    assert agg.ledger.runs.run_record(project, attempt_run_id(workflow, 3)).close.requested is False


def test_an_anonymous_close_never_speaks_for_a_ci_run_github_did_not_list(isolated, github, fork):
    """What a close without a token names is checked with GitHub: an attempt GitHub has no jobs for is refused."""
    agg, project, run_id = fork
    request, data = upload(project, run_id, "1")
    put(call(agg, "POST", "/v1/uploads", request)[1], data)
    before = footprint(isolated, project, run_id)
    status, answer = _close(agg, project, run_id, attempt=3)
    assert (status, answer) == (
        409,
        {"error": f"GitHub lists no attempt 3 of Actions run {run_id} in {project} (or more jobs than are read)"},
    )
    assert footprint(isolated, project, run_id) == before


def test_a_gitlab_retry_still_replaces_its_own_upload_in_its_pipelines_run(isolated, project):
    """GitLab has no attempts: a retried job (a new job id) replaces its own upload, as before."""
    agg = isolated.aggregator
    owner, repository = project.rsplit("/", 1)

    def job(job_id: int, tag: str) -> str:
        archive = runner.folder_archive(runner.valgrind_folder(7100, [f"g::{tag}"]), gzipped=True)
        meta = runner.gitlab_metadata(
            archive, str(job_id), "bench 1/2", owner=owner, repository=repository, commit="a" * 40
        )
        return agg.runner_upload.accept(UploadMetadata.model_validate(meta)).runId

    assert job(501, "a") == job(502, "b")


def test_the_wait_names_a_runner_job_as_its_ci_shows_it_never_by_its_key(isolated, project):
    agg = isolated.aggregator
    workflow = "9300000001"
    owner, repository = project.rsplit("/", 1)
    archive = runner.folder_archive(runner.valgrind_folder(7000, ["w::a"]), gzipped=True)
    part = runner.github_run_part(workflow, "benchmarks", "valgrind", matrix={"shard": 3}, job_index=2, job_total=3)
    sent = runner.metadata(
        archive, executor="valgrind", owner=owner, repository=repository, commit="a" * 40, run_part=part
    )
    agg.runner_upload.accept(UploadMetadata.model_validate(sent))
    agg.close_run.close(CloseRequest(project=project, run_id=workflow))  # from outside CI: the URL is awaited
    assert agg.finalize_run.finalize(project, workflow) == "waiting"
    said = agg.reports.report(project, workflow).closing
    assert said.startswith("closing: waiting for shard benchmarks [shard 3, job 3/3]'s upload, whose URL was handed")
    assert "{" not in said and said.count("UTC") == 1, said
    assert json.dumps(said)  # one sentence


def test_a_close_whose_look_at_the_bucket_fails_never_says_nothing_more_is_coming(isolated, project, run_id):
    """Before: "closing: nothing more is coming; the run ends now" for 76 s while the barrier's LIST kept
    failing and a bundle sat in the bucket."""
    from botocore.exceptions import ClientError

    agg = isolated.aggregator
    push(agg, project, run_id, "1", bundle(4242), total=2)  # in the bucket, its event not yet come
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    listed = agg.store.listed_under

    def slow_down(prefix):
        raise ClientError({"Error": {"Code": "SlowDown", "Message": "reduce your request rate"}}, "ListObjectsV2")

    agg.store.listed_under = slow_down
    try:
        with pytest.raises(ClientError):
            agg.finalize_run.finalize(project, run_id)
    finally:
        agg.store.listed_under = listed
    said = agg.reports.report(project, run_id).closing
    assert said == "closing: the run ends once what was uploaded before the close is counted"
    assert "nothing more is coming" not in said
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # the LIST answers: the bundle is awaited
    assert agg.reports.report(project, run_id).closing.startswith("closing: waiting for shard 1's bundle")


def test_a_shard_pushed_once_in_a_re_runs_attempt_is_its_first_upload_there_not_pushed_again(isolated, project, run_id):
    """Before: "pushed again: upload 2 of this attempt" on a shard pushed once in that attempt (after a GitLab
    retry, a re-run of all): the count ran across attempts."""
    agg = isolated.aggregator
    for name in ("1", "2"):
        agg.record_arrival.record(
            push(agg, project, run_id, name, bundle(4240 + int(name)), total=2, ci_attempt=1)["key"]
        )
    assert isolated.finalize_all(project, run_id) == "forwarded"
    again = push(agg, project, run_id, "1", bundle(4250), total=2, ci_attempt=2)
    agg.record_arrival.record(again["key"])
    shards = {s.name: s for s in agg.reports.report(project, attempt_run_id(run_id, 2)).shards}
    assert (shards["1"].attempt, shards["2"].attempt) == (1, 0)  # pushed once in attempt 2; carried along
