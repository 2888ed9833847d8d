"""End to end: unmodified CodSpeed runners (their exact requests, tests/runner.py) pointed at the
local stack's ``POST /upload``, on GitHub Actions, GitLab CI and Buildkite, with every executor."""

import io
import json
import re
import tarfile
import uuid

import pytest
import requests

from codspeed_local.upstream_stub import archive_of
from tests import runner
from tests.conftest import CIRCLECI_ORG, TOKEN, TOKENLESS_PROJECT
from tests.factories import wait_for

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FINAL = ("forwarded", "forward_failed", "closed_empty")


def _send(stack, metadata: dict, archive: bytes, token: str | None = TOKEN) -> runner.Upload:
    sent = runner.upload(stack.api_url, runner.Upload(metadata, archive, token=token))
    assert sent.post.status_code == 200, sent.post.text
    body = sent.post.json()
    assert set(body) == {"status", "uploadUrl", "runId"} and body["status"] == "success"
    assert sent.put.status_code == 200, sent.put.text
    return sent


def _report(stack, project: str, run_id: str) -> dict:
    answer = requests.get(f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10)
    return answer.json() if answer.status_code == 200 else {}


def _final(stack, project: str, run_id: str) -> dict:
    return wait_for(lambda: (r := _report(stack, project, run_id)).get("state") in FINAL and r, timeout=60)


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _upload_files(upload) -> tuple[dict, dict, bytes]:
    meta = json.loads((upload / "metadata.json").read_text())
    headers = {k.lower(): v for k, v in json.loads((upload / "put-headers.json").read_text()).items()}
    return meta, headers, archive_of(upload).read_bytes()


@pytest.fixture
def gh_run() -> str:
    return str(7_000_000_000 + uuid.uuid4().int % 1_000_000_000)


@pytest.fixture
def repo() -> tuple[str, str]:
    return "acme", f"bench-{uuid.uuid4().hex[:8]}"


@pytest.mark.slow
def test_a_github_matrix_of_real_valgrind_profiles_with_colliding_pids_becomes_one_upload(stack, gh_run, repo):
    owner, repository = repo
    sent = []
    for shard in (1, 2, 3):
        archive = runner.recorded(shard)  # every shard's profile is pid 2
        part = runner.github_run_part(
            gh_run, "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=3
        )
        sent.append(
            _send(
                stack,
                runner.metadata(
                    archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
                ),
                archive,
            )
        )
    assert sent[0].metadata["runPart"]["runPartId"] == (
        'bench-{"shard":1}-{"job-index":0,"job-total":3}-{"executor":"valgrind","run-index":0}'
    )
    report = _final(stack, f"{owner}/{repository}", gh_run)
    assert report["state"] == "forwarded" and report["arrived"] == report["expected"] == 3
    assert sorted(s["label"] for s in report["shards"]) == sorted(s.metadata["runPart"]["runPartId"] for s in sent)

    [upload] = stack.upstream.uploads(gh_run)
    meta, headers, archive = _upload_files(upload)
    assert headers["content-type"] == "application/x-tar" and headers["content-encoding"] == "gzip"
    assert meta["profileEncoding"] == "gzip" and meta["runner"] == sent[0].metadata["runner"]
    assert meta["runPart"]["runId"] == gh_run and meta["version"] == 10
    members = _members(archive)
    outs = sorted(n for n in members if n.endswith(".out"))
    assert outs == ["./2.out", "./3.out", "./4.out"]  # every pid once
    for name in outs:
        pid = name[2:-4]
        assert re.findall(rb"^pid: (\d+)$", members[name], re.M) == [pid.encode()]
        assert json.loads(members[f"./results/{pid}.json"])["creator"]["pid"] == int(pid)
        assert f"./valgrind.{pid}.log" in members and f"./environment-{pid}.json" in members
    benchmarks = {b.decode() for n in outs for b in re.findall(rb"Client Request: (\S+::test_\w+)", members[n])}
    assert {b.split("::")[1] for b in benchmarks} == {"test_fib_10", "test_sum", "test_sorted"}
    logs = sorted(n for n in members if n.startswith("./runner"))
    assert len(logs) == 3 and {members[n] for n in logs} == {
        f"INFO codspeed-runner: benchmarks of shard shard-{i} ran under valgrind\n".encode() for i in (1, 2, 3)
    }


@pytest.mark.slow
def test_a_job_with_two_executors_uploads_twice_and_both_are_forwarded(stack, gh_run, repo):
    owner, repository = repo
    walltime = {}
    for shard in (1, 2):
        strategy = dict(matrix={"shard": shard}, job_index=shard - 1, job_total=2)
        valgrind = runner.recorded(shard)
        _send(
            stack,
            runner.metadata(
                valgrind,
                executor="valgrind",
                owner=owner,
                repository=repository,
                commit=COMMIT,
                run_part=runner.github_run_part(gh_run, "bench", "valgrind", **strategy),
            ),
            valgrind,
        )
        archive = runner.folder_archive(runner.walltime_folder(1000 + shard, f"test_{shard}"), gzipped=False)
        walltime[shard] = _send(
            stack,
            runner.metadata(
                archive,
                executor="walltime",
                owner=owner,
                repository=repository,
                commit=COMMIT,
                run_part=runner.github_run_part(gh_run, "bench", "walltime", run_index=1, **strategy),
            ),
            archive,
        )
    report = _final(stack, f"{owner}/{repository}", gh_run)
    assert report["state"] == "forwarded" and report["expected"] == 4 and report["arrived"] == 4
    assert sorted(s["executor"] for s in report["shards"]) == ["valgrind", "valgrind", "walltime", "walltime"]
    assert not [s for s in report["shards"] if s["state"] != "arrived"]  # none late

    uploads = [_upload_files(u) for u in stack.upstream.uploads(gh_run)]
    merged = [u for u in uploads if u[0]["runner"]["executor"] == "valgrind"]
    as_sent = {u[0]["runPart"]["runPartId"]: u for u in uploads if u[0]["runner"]["executor"] == "walltime"}
    assert len(merged) == 1 and len(as_sent) == 2
    for sent in walltime.values():  # forwarded exactly as the runner sent it
        meta, headers, archive = as_sent[sent.metadata["runPart"]["runPartId"]]
        assert meta == sent.metadata and archive == sent.archive
        assert headers["content-type"] == "application/x-tar" and "content-encoding" not in headers
        assert headers["content-md5"] == sent.metadata["profileMd5"]


@pytest.mark.slow
def test_a_walltime_matrix_and_a_memory_run_reach_the_upstream_complete(stack, gh_run, repo):
    owner, repository = repo
    recorded = runner.recorded_walltime()  # a real pytest-codspeed walltime folder, plain tar
    made = runner.folder_archive(runner.walltime_folder(4242, "test_made"), gzipped=True)  # over 5 GiB the runner gzips
    memory = runner.folder_archive(runner.memory_folder(4242), gzipped=False)
    memory_run = f"{gh_run}1"
    sent = []
    for run_id, executor, archive, index, total in [
        (gh_run, "walltime", recorded, 0, 2),
        (gh_run, "walltime", made, 1, 2),
        (memory_run, "memory", memory, 0, 1),
    ]:
        part = runner.github_run_part(
            run_id, "bench", executor, matrix={"shard": index}, job_index=index, job_total=total
        )
        sent.append(
            _send(
                stack,
                runner.metadata(
                    archive, executor=executor, owner=owner, repository=repository, commit=COMMIT, run_part=part
                ),
                archive,
            )
        )
    for run_id in (gh_run, memory_run):
        assert _final(stack, f"{owner}/{repository}", run_id)["state"] == "forwarded"
    uploads = {
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"]: u
        for run_id in (gh_run, memory_run)
        for u in stack.upstream.uploads(run_id)
    }
    assert len(uploads) == 3
    for one in sent:
        meta, headers, archive = _upload_files(uploads[one.metadata["runPart"]["runPartId"]])
        assert (meta, archive) == (one.metadata, one.archive)
        assert headers.get("content-encoding") == ("gzip" if one.metadata["profileEncoding"] else None)


def test_a_gitlab_parallel_pipeline_in_a_subgroup_is_one_run(stack):
    group, repository = "platform/perf", f"engine-{uuid.uuid4().hex[:6]}"
    project = f"{group}/{repository}"
    for index in (1, 2):
        archive = runner.recorded(index)
        meta = runner.gitlab_metadata(
            archive,
            str(880_000 + index),
            f"bench {index}/2",
            owner=group,
            repository=repository,
            commit=COMMIT,
            ref="refs/heads/feature",
        )
        accepted = _send(stack, meta, archive).post.json()
    run_id = accepted["runId"]
    assert run_id.startswith(f"gl-{COMMIT[:12]}-")
    report = _final(stack, project, run_id)  # the report's path holds the subgroup
    assert report["state"] == "forwarded" and report["expected"] == 2 and report["project"] == project
    assert sorted(s["label"] for s in report["shards"]) == [
        'bench 1/2-{"executor":"valgrind","run-index":0}',
        'bench 2/2-{"executor":"valgrind","run-index":0}',
    ]
    # CodSpeed cannot combine GitLab's jobs (each its own runId): the aggregator names the pipeline's run
    assert (
        stack.upstream.uploads(commit=COMMIT, run_id="880001") + stack.upstream.uploads(commit=COMMIT, run_id="880002")
        == []
    )
    [upload] = stack.upstream.uploads(commit=COMMIT, run_id=f"gitlab@{run_id}")
    meta, _, archive = _upload_files(upload)
    assert meta["owner"] == group and sorted(n for n in _members(archive) if n.endswith(".out")) == [
        "./2.out",
        "./3.out",
    ]


def test_a_buildkite_upload_without_run_part_is_forwarded_as_it_was_sent(stack, repo):
    owner, repository = repo
    commit = uuid.uuid4().hex + "0" * 8
    archive = runner.recorded(3)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=commit,
        run_part=None,
        environment="BUILDKITE",
    )
    run_id = _send(stack, meta, archive).post.json()["runId"]
    report = _final(stack, f"{owner}/{repository}", run_id)
    assert report["state"] == "forwarded" and report["expected"] == 1
    [upload] = stack.upstream.uploads(commit=commit)
    forwarded, headers, forwarded_archive = _upload_files(upload)
    assert forwarded == meta and forwarded["runPart"] is None and forwarded_archive == archive


def test_a_re_run_after_the_forward_is_accepted_and_forwarded_as_the_next_attempt(stack, gh_run, repo):
    owner, repository = repo
    project = f"{owner}/{repository}"

    def job(shard: int) -> runner.Upload:
        archive = runner.recorded(shard)
        part = runner.github_run_part(
            gh_run, "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=2
        )
        return _send(
            stack,
            runner.metadata(
                archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
            ),
            archive,
        )

    job(1), job(2)
    assert _final(stack, project, gh_run)["state"] == "forwarded"
    again = job(2)  # "Re-run failed jobs": the same run id and job, same runPartId
    assert again.post.json()["runId"] == f"{gh_run}~2"
    # a static token says no CI attempt: the job it inherited never completes it, the re-run's close does
    from tests.e2e.test_sharded_run import _run

    closed = _run(stack, "close", "--project", project, "--run-id", gh_run)
    assert closed.returncode == 0, closed.stderr
    second = _final(stack, project, f"{gh_run}~2")
    assert second["state"] == "forwarded" and second["attempt"] == 2 and second["arrived"] == 2
    first_upload, second_upload = stack.upstream.uploads(gh_run)
    assert json.loads((second_upload / "metadata.json").read_text())["runPart"]["runId"] == gh_run
    assert sorted(n for n in _members(archive_of(second_upload).read_bytes()) if n.endswith(".out")) == [
        "./2.out",
        "./3.out",
    ]


def test_an_oidc_token_is_accepted_for_its_own_repository_only(stack, oidc_issuer, gh_run, repo):
    owner, repository = repo
    archive = runner.recorded(1)
    part = runner.github_run_part(gh_run, "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=1)
    meta = runner.metadata(
        archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
    )
    _send(stack, meta, archive, token=oidc_issuer.token(f"{owner}/{repository}"))
    assert _final(stack, f"{owner}/{repository}", gh_run)["state"] == "forwarded"

    from cryptography.hazmat.primitives.asymmetric import rsa

    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refusals = [
        (oidc_issuer.token(f"{owner}/{repository}", key=forger), 403, "signature does not verify"),
        (oidc_issuer.token(f"{owner}/{repository}", key=forger, kid="unknown"), 403, "signing key is not among"),
        (oidc_issuer.token(f"{owner}/{repository}", expires_in=-120), 403, "has expired"),
        (
            oidc_issuer.token(f"{owner}/{repository}", audience="sts.amazonaws.com"),
            403,
            "not for audience 'codspeed.io'",
        ),
        (oidc_issuer.token(f"{owner}/{repository}", issuer="https://evil.example"), 403, "was not issued by"),
        (oidc_issuer.token(f"{owner}/other"), 403, f"this token is for project {owner}/other"),
    ]
    other_run = f"{gh_run}9"
    for token, status, message in refusals:
        part = runner.github_run_part(other_run, "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=1)
        meta = runner.metadata(
            archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
        )
        refused = runner.upload(stack.api_url, runner.Upload(meta, archive, token=token))
        assert refused.post.status_code == status and message in refused.post.json()["error"], refused.post.text
    assert _report(stack, f"{owner}/{repository}", other_run) == {}  # nothing was opened


def test_tokenless_uploads_are_refused_with_how_to_allow_them_unless_the_project_allows_them(stack, gh_run, repo):
    owner, repository = repo
    archive = runner.recorded(2)
    part = runner.github_run_part(gh_run, "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=1)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=COMMIT,
        run_part=part,
        tokenless=True,
        event="pull_request",
    )
    refused = runner.upload(stack.api_url, runner.Upload(meta, archive, token=None))
    assert refused.post.status_code == 401
    assert refused.post.json()["error"] == (
        "missing Authorization header: send the aggregator's token: a request without one (a pull request from a fork) "
        f"is taken for the projects in the aggregator's TokenlessProjects parameter, and {owner}/{repository} is not "
        "one of them"
    )
    assert _report(stack, f"{owner}/{repository}", gh_run) == {}

    owner, repository = TOKENLESS_PROJECT.split("/")
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=COMMIT,
        run_part=part,
        tokenless=True,
        event="pull_request",
        ref="refs/pull/9/merge",
    )
    _send(stack, meta, archive, token=None)
    assert _final(stack, TOKENLESS_PROJECT, gh_run)["state"] == "forwarded"


def test_a_tokenless_upload_claiming_a_branch_is_refused_and_opens_nothing(stack, gh_run):
    owner, repository = TOKENLESS_PROJECT.split("/")
    archive = runner.recorded(2)
    part = runner.github_run_part(gh_run, "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=1)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=COMMIT,
        run_part=part,
        tokenless=True,
        event="push",
        ref="refs/heads/main",
    )
    refused = runner.upload(stack.api_url, runner.Upload(meta, archive, token=None))
    assert refused.post.status_code == 403
    assert refused.post.json()["error"] == (
        "a request without a token is taken for a pull request's ref only (refs/pull/N/merge), not 'refs/heads/main': "
        "a branch's run may become the baseline, and needs the aggregator's token"
    )
    assert _report(stack, TOKENLESS_PROJECT, gh_run) == {}  # nothing was opened


def test_a_run_id_ending_in_a_newline_is_a_run_that_can_be_read(stack, repo):
    """A rule means the whole name: ``96230139\\n`` is no run id, so it is keyed by its digest and
    read under that key, never kept raw as a run that can be closed but not read."""
    owner, repository = repo
    archive = runner.recorded(1)
    part = runner.github_run_part("96230139\n", "bench", "valgrind")
    sent = _send(
        stack,
        runner.metadata(archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part),
        archive,
    )
    run_id = sent.post.json()["runId"]
    assert "\n" not in run_id and run_id.startswith("96230139@")
    report = _final(stack, f"{owner}/{repository}", run_id)
    assert report["state"] == "forwarded" and report["arrived"] == 1


@pytest.mark.slow
def test_three_circleci_nodes_of_one_workflow_are_one_run_of_3_that_waits_for_the_third(stack, oidc_issuer, repo):
    """CircleCI, as the runner after 5.0.2 sends it: metadata version 11 (no ghData, no glData), the
    workflow as the run, ``{job}-{node}`` parts whose metadata names the node and the job's
    ``parallelism``, and the job's OIDC token from its organization's issuer. A "rerun workflow"
    gets a new workflow id: it is a run of its own, and the first is left as it was."""

    owner, repository = repo
    project, workflow = f"{owner}/{repository}", str(uuid.uuid4())
    token = oidc_issuer.circleci_token(CIRCLECI_ORG, f"github.com/{project}")

    def node(index: int, workflow_id: str = workflow) -> runner.Upload:
        archive = runner.recorded(index + 1)
        part = runner.circleci_run_part(workflow_id, "bench", "valgrind", node_index=index, node_total=3)
        meta = runner.metadata(
            archive,
            executor="valgrind",
            owner=owner,
            repository=repository,
            commit=COMMIT,
            run_part=part,
            environment="CIRCLECI",
            version=11,
        )
        return _send(stack, meta, archive, token=token)

    for index in (0, 1):
        assert node(index).post.json()["runId"] == workflow
    two = wait_for(lambda: (r := _report(stack, project, workflow)).get("arrived") == 2 and r)
    assert (two["state"], two["expected"]) == ("open", 3)  # node 2 is awaited, not a run of 1 forwarded early
    assert not stack.upstream.uploads(run_id=workflow)
    node(2)
    final = _final(stack, project, workflow)
    assert (final["state"], final["arrived"], final["expected"]) == ("forwarded", 3, 3)
    assert len(stack.upstream.uploads(run_id=workflow)) == 1

    rerun = str(uuid.uuid4())  # "rerun workflow": CircleCI's new workflow id
    assert node(0, rerun).post.json()["runId"] == rerun
    assert wait_for(lambda: (r := _report(stack, project, rerun)).get("arrived") == 1 and r)["expected"] == 3
    assert _report(stack, project, workflow)["state"] == "forwarded" and not _report(stack, project, f"{workflow}~2")


def test_a_circleci_token_of_an_organization_not_listed_is_refused_with_a_sentence(stack, oidc_issuer, repo):
    owner, repository = repo
    archive = runner.recorded(1)
    part = runner.circleci_run_part(str(uuid.uuid4()), "bench", "valgrind", node_index=0, node_total=1)
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=COMMIT,
        run_part=part,
        environment="CIRCLECI",
        version=11,
    )
    for token, error in (
        (
            oidc_issuer.circleci_token("another-org", f"github.com/{owner}/{repository}"),
            "the OIDC token's CircleCI organization (another-org) is not among the aggregator's CircleCiOrgIds: its "
            "operator adds it to accept the organization's jobs",
        ),
        (
            oidc_issuer.circleci_token(CIRCLECI_ORG, f"github.com/{owner}/other"),
            f"this token is for project {owner}/other: it cannot read or change {owner}/{repository}",
        ),
    ):
        refused = runner.upload(stack.api_url, runner.Upload(meta, archive, token=token))
        assert (refused.post.status_code, refused.post.json()) == (403, {"error": error})
    assert _report(stack, f"{owner}/{repository}", part["runId"]) == {}


@pytest.mark.slow
def test_a_close_right_after_the_runners_uploads_waits_for_them_on_awss_timing(stack, repo, gh_run):
    """Three matrix jobs upload (POST, then PUT) and the gate closes at once, while S3's events reach
    the arrivals queue seconds after each PUT, as on AWS: one CI attempt is one aggregator attempt with
    its three shards. Before, it read "1/3 shards in … 2 of 3 never came: missing", then a late second
    attempt, and the commit status went failure, then success."""
    from tests.e2e.test_sharded_run import _run

    owner, repository = repo
    project = f"{owner}/{repository}"
    stack.arrivals.min_age = 3.0  # an S3 event, seconds after its PUT
    try:
        for index in range(3):
            archive = runner.folder_archive(runner.valgrind_folder(7200 + index, [f"gate::s{index}"]), gzipped=True)
            part = runner.github_run_part(
                gh_run, "bench", "valgrind", matrix={"s": index}, job_index=index, job_total=3
            )
            _send(
                stack,
                runner.metadata(
                    archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
                ),
                archive,
            )
        closed = _run(stack, "close", "--project", project, "--run-id", gh_run)
        assert closed.returncode == 0, closed.stderr
        report = _final(stack, project, gh_run)
    finally:
        stack.arrivals.min_age = 0.0
    assert (report["state"], report["attempt"], report["arrived"]) == ("forwarded", 1, 3), report
    assert sorted(s["state"] for s in report["shards"]) == ["arrived"] * 3
    assert _report(stack, project, f"{gh_run}~2") == {}  # no second aggregator attempt


def test_a_body_that_is_not_utf8_is_refused_through_the_gateway_not_forwarded_with_replacement_characters(stack):
    """The local gateway handed the handler U+FFFD where a byte was not UTF-8; API Gateway base64-encodes
    such a body, and the handler refuses it (400)."""
    body = b'{"version":10,"owner":"acme","repository":"b\xffd"}'
    at = body.index(b"\xff")
    answer = requests.post(
        f"{stack.api_url}/upload",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": TOKEN},
        timeout=10,
    )
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": f"request body is not UTF-8 (byte {at} is 0xff): send JSON in UTF-8"},
    )


@pytest.mark.slow
def test_the_readme_gate_on_a_run_with_a_crashed_job_exits_11_within_seconds_of_its_close(stack, repo, gh_run):
    """Three matrix jobs; the third POSTs and crashes before its PUT. The README's gate (close, then status
    with fail-on-regression) in the same CI run: shard 3 is missing at once (exit 11), at the default URL
    expiry, with S3's events held 3 s as AWS delivers them. Before, the close waited 600 s for its URL
    and the gate timed out (exit 12)."""
    import subprocess
    import sys
    import time

    owner, repository = repo
    project = f"{owner}/{repository}"
    stack.arrivals.min_age = 3.0
    try:
        for index in range(3):
            archive = runner.folder_archive(runner.valgrind_folder(7300 + index, [f"gate::s{index}"]), gzipped=True)
            part = runner.github_run_part(
                gh_run, "bench", "valgrind", matrix={"s": index}, job_index=index, job_total=3
            )
            meta = runner.metadata(
                archive, executor="valgrind", owner=owner, repository=repository, commit=COMMIT, run_part=part
            )
            if index < 2:
                _send(stack, meta, archive)
            else:  # its POST answered, then the job died
                headers = {"Content-Type": "application/json", "User-Agent": "codspeed-runner", "Authorization": TOKEN}
                post = requests.post(f"{stack.api_url}/upload", data=runner.body_of(meta), headers=headers, timeout=30)
                assert post.status_code == 200, post.text
        gate = {
            **{k: v for k, v in __import__("os").environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI_"))},
            "GITHUB_ACTIONS": "true",
            "GITHUB_RUN_ID": gh_run,
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_REPOSITORY": project,
            "CODSPEED_AGGREGATOR_URL": stack.api_url,
            "CODSPEED_AGGREGATOR_TOKEN": TOKEN,
        }
        client = [sys.executable, "-m", "codspeed_client.cli"]
        started = time.monotonic()
        closed = subprocess.run([*client, "close", "--commit", COMMIT], env=gate, capture_output=True, text=True)
        assert closed.returncode == 0, closed.stderr
        assert "a job of CI run " + gh_run + " (attempt 1) with no bundle in the bucket is missing now" in closed.stdout
        status = subprocess.run(
            [*client, "status", "--commit", COMMIT, "--wait", "--timeout", "300", "--fail-on-regression", "5"],
            env=gate,
            capture_output=True,
            text=True,
        )
        took = time.monotonic() - started
    finally:
        stack.arrivals.min_age = 0.0
    assert status.returncode == 11, (status.stdout, status.stderr)
    assert took < 30, took
    report = _final(stack, project, gh_run)
    assert (report["attempt"], report["arrived"]) == (1, 2)
    assert [s["state"] for s in report["shards"] if s["state"] != "arrived"] == ["missing"]
