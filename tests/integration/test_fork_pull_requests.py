"""Requests without a token, through the API's own handler: a pull request from a fork on the
client's route (push, open, close, report) and on the runner drop-in's, each checked with GitHub (a
stand-in on loopback answering its pulls and Actions runs endpoints as GitHub documents them). Every
refusal says why, and changes nothing."""

import json
from dataclasses import replace

import pytest

from codspeed_aggregator.domain import asked_upload
from codspeed_aggregator.use_cases.fork_pull_requests import VERIFIED_SECONDS
from codspeed_wire.api import ShardUploadRequest
from tests import runner
from tests.factories import footprint, put
from tests.fork_pull_request import BASE, FORK, HEAD, MERGE, NUMBER, PULL, call, upload


def test_a_forks_shard_counts_and_its_close_and_report_are_taken_without_a_token(isolated, github, fork):
    agg, project, run_id = fork
    request, data = upload(project, run_id)
    status, grant = call(agg, "POST", "/v1/uploads", request)
    assert status == 201, grant
    put(grant, data)
    assert agg.record_arrival.record(grant["key"]) == "recorded"
    run = agg.ledger.runs.run_record(project, run_id)
    assert run.fork and not run.tokenless  # checked: its comment is posted, it is never a baseline
    assert call(agg, "GET", f"/v1/runs/{project}/{run_id}")[1]["arrived"] == 1
    github.jobs[(run_id, 1)] = [("bench", "GitHub Actions 2", "completed"), ("gate", "GitHub Actions 3", "in_progress")]
    gate = {"ci_run": run_id, "ci_attempt": 1, "ci_job": "GitHub Actions 3"}  # as the gate's client sends it
    status, closed = call(agg, "POST", "/v1/runs/close", {"project": project, "run_id": run_id, **gate})
    assert status == 202, closed
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    sent = isolated.upstream.uploads(run_id=run_id)
    assert len(sent) == 1 and json.loads((sent[0] / "metadata.json").read_text())["tokenless"] is True
    assert "Authorization" not in json.loads((sent[0] / "post-headers.json").read_text())
    # GitHub was asked once for the pull request and once for the run, the close for its attempt's jobs
    assert sorted(github.reads) == sorted(
        [
            f"/repos/{project}/pulls/{NUMBER}",
            f"/repos/{project}/actions/runs/{run_id}",
            f"/repos/{project}/actions/runs/{run_id}/attempts/1/jobs",
        ]
    )


def test_a_second_shard_within_a_minute_asks_github_nothing_and_after_it_asks_again(github, fork):
    agg, project, run_id = fork
    for shard in ("1", "2"):
        assert call(agg, "POST", "/v1/uploads", upload(project, run_id, shard)[0])[0] == 201
    assert len(github.reads) == 2
    agg.clock.now += VERIFIED_SECONDS + 1
    github.closed.add(NUMBER)  # closed meanwhile: a claim is checked again, and refused
    status, refused = call(agg, "POST", "/v1/uploads", upload(project, run_id, "1")[0])
    assert (status, refused["error"]) == (
        403,
        f"request without a token refused: pull request {project}#{NUMBER} is "
        "closed: only an open pull request's run is taken without a token",
    )


def _refusals(project: str, run_id: str) -> list:
    """(what the request changes, its expected status and error) for claims GitHub does not bear out."""
    at = f"{project}#{NUMBER}"
    return [
        (
            "a branch of the project",
            lambda g: g.forks.__setitem__(NUMBER, project),
            403,
            f"request without a token refused: pull request {at} comes from a branch of {project}, not from a fork: "
            "its "
            "jobs have the project's secrets, so they send the aggregator's token",
        ),
        (
            "not the head",
            lambda g: (g.pulls.__setitem__(NUMBER, ("main", "d" * 40)), g.merge_commits.pop(NUMBER)),
            403,
            f"request without a token refused: commit {MERGE[:12]} is not the head of pull request {at} "
            f"({'d' * 12}), nor a merge of it (its parents: {BASE[:12]}, {HEAD[:12]}): a pushed commit that is no "
            "longer the head is not benchmarked without a token",
        ),
        (
            "no such pull request",
            lambda g: g.pulls.pop(NUMBER),
            403,
            f"request without a token refused: GitHub has no pull request {at}",
        ),
        (
            "another run",
            lambda g: g.workflow_runs.__setitem__(run_id, ("e" * 40, FORK)),
            403,
            f"request without a token refused: Actions run {run_id} of {project} did not run pull request {at}'s head "
            f"{HEAD[:12]}: a run without a token is the pull request's own workflow run",
        ),
        (
            "no such run",
            lambda g: g.workflow_runs.pop(run_id),
            403,
            f"request without a token refused: GitHub has no Actions run {run_id} in {project}: a run without a token "
            "is "
            "the pull request's own workflow run (GITHUB_RUN_ID)",
        ),
        (
            "its run completed",
            lambda g: g.completed_runs.add(run_id),
            403,
            f"request without a token refused: Actions run {run_id} of {project} is completed: a run without a "
            "token takes uploads only while its jobs run (a re-run of its jobs starts it again)",
        ),
    ]


@pytest.mark.parametrize("case", range(6), ids=["branch", "not-head", "no-pull", "other-run", "no-run", "completed"])
@pytest.mark.slow
def test_a_claim_github_does_not_bear_out_is_refused_and_changes_nothing(isolated, github, fork, case):
    agg, project, run_id = fork
    what, change, status, error = _refusals(project, run_id)[case]
    change(github)
    before = footprint(isolated, project, run_id)
    for path, body in (
        ("/v1/uploads", upload(project, run_id)[0]),
        ("/v1/runs/open", {"project": project, "run_id": run_id, "commit": MERGE, "ref": PULL, "total": 2}),
    ):
        assert call(agg, "POST", path, body) == (status, {"error": error}), (what, path)
    assert footprint(isolated, project, run_id) == before


@pytest.mark.slow
def test_requests_without_a_token_are_refused_with_a_sentence_where_they_may_not_go(isolated, github, fork):
    agg, project, run_id = fork
    before = footprint(isolated, project, run_id)
    unlisted = f"{project}-other"
    request, _ = upload(unlisted, run_id)
    assert call(agg, "POST", "/v1/uploads", request) == (
        401,
        {
            "error": (
                "missing Authorization header: send the aggregator's token: a request without one (a pull request "
                "from a fork) "
                f"is taken for the projects in the aggregator's TokenlessProjects parameter, and {unlisted} is not "
                "one of them"
            )
        },
    )
    said_so = upload(project, run_id, tokenless=False)[0]  # upstream it would go with the stack's token
    assert call(agg, "POST", "/v1/uploads", said_so) == (
        401,
        {"error": "missing Authorization header: send the aggregator's token"},
    )
    branch = upload(project, run_id, ref="refs/heads/main")[0]
    assert call(agg, "POST", "/v1/uploads", branch) == (
        403,
        {
            "error": (
                "a request without a token is taken for a pull request's ref only (refs/pull/N/merge), not "
                "'refs/heads/main': "
                "a branch's run may become the baseline, and needs the aggregator's token"
            )
        },
    )
    big = upload(project, run_id, size=agg.settings.tokenless_max_bundle_bytes + 1)[0]
    assert call(agg, "POST", "/v1/uploads", big) == (
        422,
        {
            "error": (
                f"size {agg.settings.tokenless_max_bundle_bytes + 1} is over the limit of "
                f"{agg.settings.tokenless_max_bundle_bytes} "
                "bytes for a shard sent without a token (the aggregator's TokenlessMaxBundleBytes)"
            )
        },
    )
    assert call(agg, "GET", f"/v1/costs?project={project}")[0] == 401
    assert footprint(isolated, project, run_id) == before


@pytest.mark.slow
def test_a_run_opened_with_a_token_is_neither_closed_nor_read_without_one(isolated, fork):
    agg, project, run_id = fork
    request, _ = upload(project, run_id, tokenless=False)
    agg.request_upload.grant(ShardUploadRequest.model_validate(request))
    before = footprint(isolated, project, run_id)
    error = (
        "missing Authorization header: send the aggregator's token (without one, only the run of a pull request "
        "from a fork can be closed or read)"
    )
    assert call(agg, "POST", "/v1/runs/close", {"project": project, "run_id": run_id}) == (401, {"error": error})
    assert call(agg, "GET", f"/v1/runs/{project}/{run_id}") == (401, {"error": error})
    assert call(agg, "GET", f"/v1/runs/{project}/no-such-run") == (401, {"error": error})
    assert footprint(isolated, project, run_id) == before


@pytest.mark.slow
def test_without_a_github_token_the_clients_route_is_refused_and_the_drop_in_is_taken_unchecked(isolated, fork):
    agg, project, run_id = fork
    agg = replace(agg, github_pulls=None)
    before = footprint(isolated, project, run_id)
    assert call(agg, "POST", "/v1/uploads", upload(project, run_id)[0]) == (
        403,
        {
            "error": (
                f"a request without a token for {project} is checked with GitHub (the pull request comes from a fork, "
                "the "
                "commit is its head), and this aggregator has no GitHub token: its operator sets GitHubTokenParameter "
                "(a token "
                "that reads pull requests and Actions runs)"
            )
        },
    )
    assert footprint(isolated, project, run_id) == before


@pytest.mark.parametrize("answer, status", [(500, 502), (401, 403)], ids=["github-down", "token-refused"])
@pytest.mark.slow
def test_github_failing_is_a_502_naming_github_and_refusing_the_stacks_token_a_sentence(
    isolated, github, fork, answer, status
):
    """GitHub's failure was a 503 saying "the aggregator's storage is busy"."""
    agg, project, run_id = fork
    github.fail_with = answer
    before = footprint(isolated, project, run_id)
    got, body = call(agg, "POST", "/v1/uploads", upload(project, run_id)[0])
    assert got == status, body
    if status == 502:
        assert body["error"] == (
            f"GitHub answered 500 when asked about pull request {NUMBER}: send the request again in a minute"
        )
    if status == 403:
        assert body["error"] == (
            f"GitHub refused the aggregator's token ({answer}) when asked about {project}'s pull "
            f"request {NUMBER}: its operator gives GitHubTokenParameter a token that reads pull "
            "requests and Actions runs"
        )
    assert footprint(isolated, project, run_id) == before


def _runnerupload(project: str, run_id: str, commit: str = MERGE) -> tuple[dict, bytes]:
    """CodSpeed's runner in a fork's pull request: the metadata it POSTs (tokenless) and its archive. Its
    commitHash is its checkout's HEAD: actions/checkout's default on a pull request, GitHub's merge commit."""
    archive = runner.recorded(1)
    owner, repository = project.rsplit("/", 1)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=commit,
        ref=PULL,
        head_ref="someone:feature-8",
        base_ref="main",
        event="pull_request",
        tokenless=True,
        run_part=runner.github_run_part(run_id, "bench", "valgrind"),
    )
    return meta, archive


def _runner_post(agg, project: str, run_id: str, commit: str = MERGE) -> tuple[int, dict]:
    """Its POST /upload, with no Authorization header."""
    return call(agg, "POST", "/upload", _runnerupload(project, run_id, commit)[0])


@pytest.mark.slow
def test_the_runner_drop_in_without_a_token_is_checked_where_the_stack_has_a_github_token(isolated, github, fork):
    agg, project, run_id = fork
    before = footprint(isolated, project, run_id)
    assert _runner_post(agg, project, run_id, commit="d" * 40) == (
        403,
        {
            "error": (
                f"request without a token refused: commit {'d' * 12} is neither the head of pull request "
                f"{project}#{NUMBER} ({HEAD[:12]}) nor a commit GitHub has: a pushed commit that is no longer "
                "the head is not benchmarked without a token"
            )
        },
    )
    assert footprint(isolated, project, run_id) == before
    status, accepted = _runner_post(agg, project, run_id)
    assert status == 200, accepted
    run = agg.ledger.runs.run_record(project, run_id)
    assert run.fork and not run.tokenless  # checked: its comment is posted


def test_without_a_github_token_the_runner_drop_in_is_taken_unchecked_and_posts_no_comment(isolated, fork):
    agg, project, run_id = fork
    agg = replace(agg, github_pulls=None)
    status, accepted = _runner_post(agg, project, run_id, commit="d" * 40)  # nothing can check it
    assert status == 200, accepted
    run = agg.ledger.runs.run_record(project, run_id)
    assert run.tokenless and not run.fork  # unchecked: no comment, no close or report without a token
    before = footprint(isolated, project, run_id)
    error = (  # it said "only the run of a pull request from a fork can be closed", of a fork's run
        "missing Authorization header: send the aggregator's token: this aggregator has no GitHub token "
        "(GitHubTokenParameter) to bear out a pull request from a fork, so without a token no run is closed or "
        "read (a fork's run ends at its deadline, or when the CI webhook says the workflow finished)"
    )
    assert call(agg, "POST", "/v1/runs/close", {"project": project, "run_id": run_id}) == (401, {"error": error})
    assert call(agg, "GET", f"/v1/runs/{project}/{run_id}") == (401, {"error": error})
    assert footprint(isolated, project, run_id) == before


def test_a_runners_shard_over_the_tokenless_limit_is_rejected_when_it_lands(isolated, fork):
    """The runner's upload URL signs its MD5, not its size: a shard sent without a token is held to
    TokenlessMaxBundleBytes when it lands, and shows rejected, saying why."""
    from urllib.parse import unquote, urlsplit

    import requests

    agg, project, run_id = fork
    agg = replace(agg, settings=replace(agg.settings, tokenless_max_bundle_bytes=64))
    meta, archive = _runnerupload(project, run_id)
    status, accepted = call(agg, "POST", "/upload", meta)
    assert status == 200, accepted
    assert (
        requests.put(
            accepted["uploadUrl"],
            data=archive,
            timeout=30,
            headers={
                "Content-MD5": meta["profileMd5"],
                "Content-Type": "application/x-tar",
                "Content-Encoding": "gzip",
            },
        ).status_code
        == 200
    )
    key = unquote(urlsplit(accepted["uploadUrl"]).path.split("/", 2)[2])
    assert agg.record_arrival.record(key, len(archive)) == "rejected"
    [shard] = [s for s in agg.reports.report(project, run_id).shards if s.state == "rejected"]
    assert shard.reason == (
        f"the bundle is {len(archive)} bytes, over the 64 a shard sent without a token may be (the aggregator's "
        "TokenlessMaxBundleBytes)"
    )


def test_the_runners_fork_upload_names_githubs_merge_commit_and_is_taken(isolated, github, fork):
    """The oxc case: CodSpeed's runner in a fork's pull request sends its checkout's HEAD, GitHub's
    merge commit (refs/pull/N/merge), not the head. GitHub's merge_commit_sha names it: nothing more
    is asked. It was refused (403) before, and the contributor's job went red."""
    agg, project, run_id = fork
    meta, archive = _runnerupload(project, run_id)
    status, accepted = call(agg, "POST", "/upload", meta)
    assert status == 200, accepted
    assert agg.ledger.runs.run_record(project, run_id).fork
    assert sorted(github.reads) == sorted(
        [f"/repos/{project}/pulls/{NUMBER}", f"/repos/{project}/actions/runs/{run_id}"]
    )


def test_a_merge_commit_of_a_base_that_moved_since_is_taken_once_github_bears_it_out(isolated, github, fork):
    """main moved while the jobs ran: GitHub recomputed its merge commit, and the job's is older. Its
    parents say what it is (the head merged into a commit on main)."""
    agg, project, run_id = fork
    github.commit_on("main", "f" * 40)  # main's new tip, after BASE
    github.merge_commits[NUMBER] = "1" * 40
    status, accepted = _runner_post(agg, project, run_id)
    assert status == 200, accepted
    assert f"/repos/{project}/commits/{MERGE}" in github.reads
    assert f"/repos/{project}/compare/main...{BASE}" in github.reads


def _merges(project: str) -> list:
    """(what changes in GitHub's history, the refusal) for a commit that is neither the head nor a merge of it."""
    at = f"{project}#{NUMBER}"
    return [
        (
            lambda g: g.commits.__setitem__(MERGE, [BASE, "d" * 40]),
            f"commit {MERGE[:12]} is not the head of pull request {at} ({HEAD[:12]}), nor a merge of it "
            f"(its parents: {BASE[:12]}, {'d' * 12}): a pushed commit that is no longer the head is not "
            "benchmarked without a token",
        ),
        (
            lambda g: (g.commits.__setitem__("a" * 40, []), g.commits.__setitem__(MERGE, ["a" * 40, HEAD])),
            f"commit {MERGE[:12]} merges pull request {at}'s head into {'a' * 12}, which is not on its base "
            "branch 'main': only a merge into the base branch is taken",
        ),
    ]


@pytest.mark.parametrize("case", range(2), ids=["another-head", "not-into-the-base"])
def test_a_merge_commit_that_does_not_merge_the_head_into_the_base_is_refused_and_changes_nothing(
    isolated, github, fork, case
):
    agg, project, run_id = fork
    change, error = _merges(project)[case]
    github.merge_commits.pop(NUMBER)
    change(github)
    before = footprint(isolated, project, run_id)
    assert _runner_post(agg, project, run_id) == (403, {"error": f"request without a token refused: {error}"})
    assert footprint(isolated, project, run_id) == before


ODD = {
    "pull-without-head": (r"/pulls/\d+$", lambda a: {k: v for k, v in a.items() if k != "head"}),
    "pull-head-null": (r"/pulls/\d+$", lambda a: {**a, "head": None}),
    "pull-a-list": (r"/pulls/\d+$", lambda a: [a]),
    "run-head-sha-null": (r"/actions/runs/\d+$", lambda a: {**a, "head_sha": None}),
    "commit-without-parents": (r"/commits/[0-9a-f]{40}$", lambda a: {"sha": a["sha"]}),
}


@pytest.mark.parametrize("case", list(ODD))
def test_githubs_odd_answers_to_any_lookup_are_a_424_naming_github_and_the_field_and_change_nothing(
    isolated, github, fork, monkeypatch, case
):
    import re

    from tests import fake_github

    agg, project, run_id = fork
    github.merge_commits.pop(NUMBER)  # the commit is looked up too
    where, odd = ODD[case]
    answer = fake_github._GitHubHandler._answer

    def oddly(handler, status, body, headers=None):
        changed = odd(body) if status == 200 and re.search(where, handler.path) else body
        return answer(handler, status, changed, headers)

    monkeypatch.setattr(fake_github._GitHubHandler, "_answer", oddly)
    before = footprint(isolated, project, run_id)
    status, body = _runner_post(agg, project, run_id)
    # not a 5xx, which the client and the runner retry: asking again reads the same answer
    assert status == 424 and f"GitHub's answer about pull request {NUMBER} could not be read: GET " in body["error"]
    assert "in a form GitHub's API does not document" in body["error"] and "storage" not in body["error"]
    assert footprint(isolated, project, run_id) == before


def test_a_fork_cannot_join_a_run_a_token_opened_nor_then_read_or_close_it(isolated, github, fork):
    """Same ref, head and Actions run id as the token holder's: it joined the run, which was then readable
    and closable without a token."""
    agg, project, run_id = fork
    request, _ = upload(project, run_id, tokenless=False)
    agg.request_upload.grant(ShardUploadRequest.model_validate(request))  # the project's own job, with its token
    before = footprint(isolated, project, run_id)
    assert _runner_post(agg, project, run_id) == (
        403,
        {
            "error": f"run {run_id} of {project} was opened with a token: a request without one cannot join it "
            "(a fork's pull request runs in a workflow run of its own)"
        },
    )
    assert footprint(isolated, project, run_id) == before
    assert call(agg, "POST", "/v1/runs/close", {"project": project, "run_id": run_id})[0] == 401


def test_a_refused_claim_is_remembered_for_a_minute_and_costs_github_nothing_more(github, fork):
    """Thirty bogus claims cost sixty GitHub calls of the stack's rate limit."""
    agg, project, run_id = fork
    github.closed.add(NUMBER)
    for _ in range(30):
        assert call(agg, "POST", "/v1/uploads", upload(project, run_id)[0])[0] == 403
    assert len(github.reads) == 2  # the pull request and the run, once
    agg.clock.now += VERIFIED_SECONDS + 1
    assert call(agg, "POST", "/v1/uploads", upload(project, run_id)[0])[0] == 403
    assert len(github.reads) == 4  # asked again once it is forgotten


def test_a_run_opened_without_a_token_takes_a_bounded_number_of_uploads(isolated, github, fork, monkeypatch):
    agg, project, run_id = fork
    monkeypatch.setattr(asked_upload, "MAX_FORK_UPLOADS", 2)  # the count's bound, and the check's
    for shard in ("1", "2"):
        assert call(agg, "POST", "/v1/uploads", upload(project, run_id, shard)[0])[0] == 201
    before = footprint(isolated, project, run_id)
    assert call(agg, "POST", "/v1/uploads", upload(project, run_id, "1")[0]) == (
        422,
        {"error": f"run {run_id} of {project} took 2 uploads without a token, the most a run without one takes (2)"},
    )
    assert footprint(isolated, project, run_id) == before


def test_grants_without_a_token_racing_past_the_bound_are_refused_by_the_counts_condition(
    isolated, github, fork, monkeypatch
):
    """The bound is the count's own condition, not a read before it: a grant that read 8 of 10 while
    two others were counted meanwhile is refused with the sentence, and the count stays at 10 (before,
    20 concurrent grants at 190 left it at 210)."""
    agg, project, run_id = fork
    monkeypatch.setattr(asked_upload, "MAX_FORK_UPLOADS", 10)  # the count's bound, and the check's
    for _ in range(8):
        assert call(agg, "POST", "/v1/uploads", upload(project, run_id, "1")[0])[0] == 201
    runs, opened = agg.ledger.runs, agg.ledger.runs.open_run
    for _ in range(2):  # two concurrent grants, counted between this one's read and its count
        assert agg.ledger.closes.count_grant(project, run_id, 10)

    stale = [8]

    def read_before_they_counted(run):  # this grant's first read; its retry reads afresh
        found, created = opened(run)
        return (replace(found, grants=stale.pop()) if stale else found), created

    monkeypatch.setattr(runs, "open_run", read_before_they_counted)
    before = footprint(isolated, project, run_id)
    assert call(agg, "POST", "/v1/uploads", upload(project, run_id, "1")[0]) == (
        422,
        {"error": f"run {run_id} of {project} took 10 uploads without a token, the most a run without one takes (10)"},
    )
    assert runs.run_record(project, run_id).grants == 10
    assert footprint(isolated, project, run_id) == before


def test_a_commit_github_does_not_know_is_refused_saying_so_not_a_503_to_retry(isolated, github, fork):
    """GitHub answers 422 "No commit found for SHA" for a commit it does not know: that was a 503."""
    agg, project, run_id = fork
    github.merge_commits.pop(NUMBER)  # the commit is looked up
    unknown = "f" * 40
    before = footprint(isolated, project, run_id)
    status, body = _runner_post(agg, project, run_id, commit=unknown)
    assert status == 403, body
    assert f"commit {unknown[:12]} is neither the head of pull request {project}#{NUMBER}" in body["error"]
    assert "nor a commit GitHub has" in body["error"]
    assert footprint(isolated, project, run_id) == before


def test_a_gitlab_runner_upload_without_a_token_is_never_checked_with_github(isolated, github, fork):
    """A GitLab merge request is no GitHub pull request: it was asked of GitHub's API and answered 503
    "the aggregator's storage is busy (GitHub's answer about pull request 4 … KeyError)"."""
    agg, project, run_id = fork
    owner, repository = project.rsplit("/", 1)
    archive = runner.recorded(1)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=MERGE,
        provider="GITLAB",
        environment="GITLAB_CI",
        ref="refs/pull/4/merge",
        event="pull_request",
        tokenless=True,
        run_part=runner.gitlab_run_part("5550001", "bench 1/2", "valgrind"),
    )
    asked = len(github.requests)
    before = footprint(isolated, project, run_id)
    assert call(agg, "POST", "/upload", meta) == (
        403,
        {
            "error": f"a request without a token for {project} comes from GITLAB (its metadata's repositoryProvider): "
            "the aggregator bears out a fork's pull request with GitHub's API only, and has no check for GITLAB's: "
            "send the aggregator's token"
        },
    )
    assert len(github.requests) == asked and footprint(isolated, project, run_id) == before


def test_a_one_upload_tokenless_gitlab_merge_requests_merged_upload_has_its_run_hash_in_the_report(isolated, project):
    """Before: a merged part's POST had no Run Hash anywhere (only a part sent as its runner sent it did):
    a fork's merge request in one-upload mode had nothing to find its run by on CodSpeed."""
    import hashlib
    from urllib.parse import unquote, urlsplit

    import requests

    from codspeed_wire.upstream import UploadMetadata

    base = isolated.aggregator
    agg = replace(
        base,
        settings=replace(base.settings, tokenless_projects=frozenset({project}), forward_mode="one-upload"),
    )
    owner, repository = project.rsplit("/", 1)
    run_ids = set()
    for index in (1, 2):
        archive = runner.folder_archive(runner.valgrind_folder(7100 + index, [f"mr::b{index}"]), gzipped=True)
        meta = runner.gitlab_metadata(
            archive, str(6660000 + index), f"bench {index}/2", owner=owner, repository=repository,
            commit=HEAD, tokenless=True,
        )  # fmt: skip
        accepted = agg.runner_upload.accept(UploadMetadata.model_validate(meta))
        headers = {"Content-MD5": meta["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
        assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
        assert agg.record_arrival.record(unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2])) == "recorded"
        run_ids.add(accepted.runId)
    [run_id] = run_ids
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    [sent] = isolated.upstream.uploads(run_id=f"gitlab@{run_id}") or isolated.upstream.uploads(run_id=run_id)
    assert json.loads((sent / "metadata.json").read_text())["tokenless"] is True
    assert "Authorization" not in json.loads((sent / "post-headers.json").read_text())
    said = hashlib.sha256((sent / "post-body.json").read_bytes()).hexdigest()
    assert agg.reports.report(project, run_id).upstream.run_hashes == [said]
    from codspeed_wire.markdown import render_markdown

    assert f"CodSpeed Run Hash: `{said}`" in render_markdown(agg.reports.report(project, run_id))
