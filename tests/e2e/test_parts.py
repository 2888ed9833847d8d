"""Forwarding in parts end to end: the real client, the local stack's pollers, the stand-in upstream.
Each shard's results are upstream before the next shard is pushed; after a re-run shard, a
second delivery of an S3 event and a close with a shard skipped, the upstream's combined view
(the last upload of each runPartId) holds every benchmark once."""

import json
import time
import uuid
from urllib.parse import quote_plus

import pytest

from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.domain.keys import run_bundles_prefix
from codspeed_local.profiles import make_profile_folder
from codspeed_rules.runner_json import pushed_part_id
from tests.conftest import PARTS_PROJECT as PROJECT
from tests.e2e.test_sharded_run import _final, _report, _run
from tests.factories import wait_for


def _push(stack, run_id: str, shard: int, folder, ref: str) -> None:
    pushed = _run(
        stack,
        "push",
        "--shard",
        f"{shard}/4",
        "--profile-folder",
        str(folder),
        "--project",
        PROJECT,
        "--run-id",
        run_id,
        "--commit",
        "e" * 40,
        "--ref",
        ref,
        "--base-ref",
        "main",
    )
    assert pushed.returncode == 0, pushed.stderr


def _folder(tmp_path, shard: int, cost: int = 1000):
    names = [f"tests/test_{shard}.py::test_{j}" for j in range(2)]
    return make_profile_folder(tmp_path / f"shard-{shard}-{cost}", 4200 + shard, names, costs={n: cost for n in names})


def _upstream(stack, run_id: str) -> list[str]:
    return [
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in stack.upstream.uploads(run_id)
    ]


def _deliver_again(stack, project: str, run_id: str, shard: int) -> None:
    """S3's event of a shard's bundle, sent to the arrivals queue a second time (S3 delivers at least once)."""
    s3 = client("s3")
    [key] = [
        o["Key"]
        for o in s3.list_objects_v2(Bucket=stack.resources.bucket, Prefix=run_bundles_prefix(project, run_id))[
            "Contents"
        ]
        if f"/{shard}/" in o["Key"]
    ]
    head = s3.head_object(Bucket=stack.resources.bucket, Key=key)
    event = {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "bucket": {"name": stack.resources.bucket},
                    "object": {"key": quote_plus(key), "size": head["ContentLength"], "versionId": head["VersionId"]},
                },
            }
        ]
    }
    client("sqs").send_message(QueueUrl=stack.resources.arrivals_queue_url, MessageBody=json.dumps(event))


@pytest.mark.slow
def test_each_shard_is_upstream_before_the_next_is_pushed_and_every_benchmark_once_after_all(stack, tmp_path):
    tag = uuid.uuid4().hex[:8]
    main = f"main-{tag}"
    for shard in range(1, 5):  # main's run, the baseline shard 4 is carried from
        _push(stack, main, shard, _folder(tmp_path, shard), "refs/heads/main")
    assert _final(stack, PROJECT, main)["state"] == "forwarded"
    assert sorted(_upstream(stack, main)) == sorted(pushed_part_id(str(s), "valgrind") for s in range(1, 5))

    run_id, ref, waited = f"pr-{tag}", "refs/pull/9/merge", []
    for count, shard in enumerate((1, 2), start=1):
        pushed_at = time.monotonic()
        _push(stack, run_id, shard, _folder(tmp_path, shard, 1100), ref)
        wait_for(
            lambda count=count: len(_upstream(stack, run_id)) == count, timeout=30
        )  # before the next shard is pushed
        waited.append(time.monotonic() - pushed_at)
    _push(stack, run_id, 2, _folder(tmp_path, 2, 1200), ref)  # shard 2's job re-run
    wait_for(lambda: len(_upstream(stack, run_id)) == 3, timeout=30)
    _push(stack, run_id, 3, _folder(tmp_path, 3, 1100), ref)
    wait_for(lambda: len(_upstream(stack, run_id)) == 4, timeout=30)
    _deliver_again(stack, PROJECT, run_id, 3)
    wait_for(
        lambda: any(s["name"] == "3" and s["upstream"] for s in _report(stack, PROJECT, run_id)["shards"]), timeout=30
    )
    closed = _run(stack, "close", "--skip", "4", "--project", PROJECT, "--run-id", run_id)
    assert closed.returncode == 0, closed.stderr
    final = _final(stack, PROJECT, run_id)
    assert final["state"] == "forwarded", final
    assert {s["name"]: (s["state"], s["upstream"]) for s in final["shards"]} == {
        "1": ("arrived", True),
        "2": ("arrived", True),
        "3": ("arrived", True),
        "4": ("carried", False),
    }
    ids = [pushed_part_id(str(s), "valgrind") for s in (1, 2, 2, 3)]
    assert _upstream(stack, run_id) == ids  # the re-run replaced its part; the skipped one is left to CodSpeed
    assert not stack.upstream.benchmarks_twice(PROJECT)
    assert max(waited) < 10, waited


def test_a_runner_jobs_part_is_upstream_before_the_next_job_exists_byte_for_byte(stack):
    """The parts mode: a matrix job's POST body (serde_json's compact form, non-ASCII as it is) and
    its archive reach the upstream as the runner sent them, with its User-Agent, before the matrix's
    next job has run. They were re-serialized (1101 bytes became 1194), so the runner's printed
    Run Hash named bytes CodSpeed never received."""
    from tests import runner
    from tests.conftest import TOKEN

    owner, repository = PROJECT.split("/")
    workflow, sent = str(9_300_000_000 + uuid.uuid4().int % 1_000_000), []
    for shard in (1, 2):
        archive = runner.folder_archive(runner.valgrind_folder(7000 + shard, [f"bytes::s{shard}"]), gzipped=True)
        part = runner.github_run_part(
            workflow, "bench", "valgrind", matrix={"shard": shard, "note": "Zürich ✓"}, job_index=shard - 1, job_total=2
        )
        meta = runner.metadata(
            archive, executor="valgrind", owner=owner, repository=repository, commit="f" * 40, run_part=part
        )
        pushed_at = time.monotonic()
        up = runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN))
        assert up.post.status_code == 200 and up.put.status_code == 200, up.post.text
        assert b"Z\xc3\xbcrich \xe2\x9c\x93" in up.body  # as the runner writes it, not \u-escaped
        [held] = wait_for(
            lambda p=part["runPartId"]: [
                u
                for u in stack.upstream.uploads(workflow)
                if json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] == p
                and (u / "archive.tar.gz").exists()
            ],
            timeout=30,
        )
        sent.append(time.monotonic() - pushed_at)
        assert (held / "post-body.json").read_bytes() == up.body
        assert (held / "archive.tar.gz").read_bytes() == archive
        assert json.loads((held / "post-headers.json").read_text())["User-Agent"] == "codspeed-runner"
        assert len(stack.upstream.uploads(workflow)) == shard  # the next job has not run yet
    report = _final(stack, PROJECT, workflow)
    assert report["state"] == "forwarded" and report["arrived"] == 2 and len(stack.upstream.uploads(workflow)) == 2
    assert max(sent) < 10, sent


def test_a_jobs_oidc_token_goes_upstream_with_its_part_while_it_is_valid(stack, oidc_issuer):
    """The parts mode relays the job's own OIDC token (CodSpeed takes it from the job too), so a
    project that authenticates with OIDC needs no CodSpeed token on the stack: it was replaced by
    the stack's. A token that expired before its part went is replaced, never sent."""
    from tests import runner

    owner, repository = PROJECT.split("/")
    workflow = str(9_400_000_000 + uuid.uuid4().int % 1_000_000)

    def job(shard: int, token: str) -> runner.Upload:
        archive = runner.folder_archive(runner.valgrind_folder(7100 + shard, [f"oidc::s{shard}"]), gzipped=True)
        part = runner.github_run_part(
            workflow, "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=2
        )
        meta = runner.metadata(
            archive, executor="valgrind", owner=owner, repository=repository, commit="a" * 40, run_part=part
        )
        up = runner.upload(stack.api_url, runner.Upload(meta, archive, token=token))
        assert up.post.status_code == 200 and up.put.status_code == 200, up.post.text
        return up

    valid = oidc_issuer.token(PROJECT)
    job(1, valid)
    [first] = wait_for(
        lambda: [u for u in stack.upstream.uploads(workflow) if (u / "archive.tar.gz").exists()], timeout=30
    )
    assert json.loads((first / "post-headers.json").read_text())["Authorization"] == valid
    short = oidc_issuer.token(PROJECT, expires_in=45)  # good for its POST here, not past the send's minute of margin
    job(2, short)
    wait_for(
        lambda: len([u for u in stack.upstream.uploads(workflow) if (u / "archive.tar.gz").exists()]) == 2, timeout=30
    )
    second = stack.upstream.uploads(workflow)[-1]
    assert json.loads((second / "post-headers.json").read_text())["Authorization"] == stack.upstream.token
    assert _final(stack, PROJECT, workflow)["state"] == "forwarded"
    shown = json.dumps(_report(stack, PROJECT, workflow))
    assert valid not in shown and short not in shown  # never reported


@pytest.mark.slow
def test_push_ends_once_its_shards_part_is_upstream_and_a_wait_that_runs_out_is_a_warning(stack, tmp_path):
    """As CodSpeed's runner ends its job after its upload: ``push`` in the parts mode returns once the
    shard's part is upstream, and says where; a part not upstream in time is a warning, exit 0."""
    run_id = f"wait-{uuid.uuid4().hex[:8]}"
    common = ["--project", PROJECT, "--run-id", run_id, "--commit", "e" * 40, "--ref", "refs/heads/side"]
    pushed = _run(stack, "push", "--shard", "1/2", "--profile-folder", str(_folder(tmp_path, 1)), "--json", *common)
    assert pushed.returncode == 0, pushed.stderr
    answer = json.loads(pushed.stdout)
    [part] = stack.upstream.uploads(run_id)  # upstream already when push returned: no waiting here
    assert answer["upstream"]["run_id"] == part.name  # the stand-in answers each POST with its upload's folder as runId
    stack.upstream.failures.extend([503] * 3)  # the next send fails (its message is retried a minute later)
    late = _run(
        stack,
        "push",
        "--shard",
        "2/2",
        "--profile-folder",
        str(_folder(tmp_path, 2)),
        "--wait-upstream",
        "1.5",
        *common,
    )
    assert late.returncode == 0, late.stderr
    assert (
        "::warning title=codspeed-client::shard 2 of run " in late.stderr
        and "was not upstream within 1.5 s" in late.stderr
    )
    assert "upstream: its part" not in late.stdout and "pushed shard 2 of 2" in late.stdout
    del stack.upstream.failures[:]


@pytest.mark.slow
def test_a_run_across_two_workflows_goes_upstream_as_one_codspeed_run_each_benchmark_once(stack, tmp_path):
    """Pushed shards of two workflows (or CI systems) named one run: in the parts mode each goes as it
    lands, all under the run's one upstream run id, so CodSpeed combines them as one run's parts."""
    run_id = f"across-{uuid.uuid4().hex[:8]}"
    for shard in (1, 2):  # each the job of a workflow of its own, on one commit and ref
        pushed = _run(
            stack,
            "push",
            "--shard",
            f"{shard}/2",
            "--profile-folder",
            str(_folder(tmp_path, shard)),
            "--project",
            PROJECT,
            "--run-id",
            run_id,
            "--commit",
            "d" * 40,
            "--ref",
            "refs/heads/across",
        )
        assert pushed.returncode == 0, pushed.stderr
    assert _final(stack, PROJECT, run_id)["state"] == "forwarded"
    [parts] = [p for (project, run), p in stack.upstream.combined(PROJECT).items() if run == run_id]
    assert sorted(parts) == [pushed_part_id("1", "valgrind"), pushed_part_id("2", "valgrind")]
    assert not stack.upstream.benchmarks_twice(PROJECT)


def test_a_runner_post_as_large_as_the_api_takes_is_kept_and_forwarded_byte_for_byte(stack):
    """The POST is kept in its metadata's DynamoDB item (400 KB at most), not in an object: the API
    takes 256 KiB at most, so the largest one it accepts fits, and goes upstream as it came."""
    from codspeed_aggregator.handlers.api import MAX_BODY
    from tests import runner
    from tests.conftest import TOKEN

    owner, repository = PROJECT.split("/")
    workflow = str(9_600_000_000 + uuid.uuid4().int % 1_000_000)
    archive = runner.folder_archive(runner.valgrind_folder(7400, ["big::post"]), gzipped=True)
    part = runner.github_run_part(workflow, "bench", "valgrind")
    meta = runner.metadata(
        archive, executor="valgrind", owner=owner, repository=repository, commit="9" * 40, run_part=part
    )
    meta["laterField"] = "x" * (MAX_BODY - len(runner.body_of(meta)) - 20)  # a field of a later runner: kept as it is
    up = runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN))
    assert up.post.status_code == 200 and MAX_BODY - 100 < len(up.body) <= MAX_BODY, (up.post.text, len(up.body))
    [held] = wait_for(
        lambda: [u for u in stack.upstream.uploads(workflow) if (u / "archive.tar.gz").exists()], timeout=30
    )
    assert (held / "post-body.json").read_bytes() == up.body


@pytest.mark.slow
def test_a_gitlab_pipelines_jobs_go_upstream_as_one_codspeed_run_only_their_run_id_rewritten(stack):
    """CodSpeed's runner names each GitLab job's own id as its run (CI_JOB_ID): CodSpeed alone shows a
    ``parallel: 2`` job as two runs of half the benchmarks each. Each part still goes as it lands, its
    POST's bytes as the job sent them but for ``runPart.runId``: the pipeline's one run, ``gitlab@<run>``."""
    from codspeed_aggregator.domain.metadata import with_run_id
    from codspeed_rules.runner_json import compact
    from tests import runner
    from tests.conftest import TOKEN

    owner, repository = PROJECT.split("/")
    commit, bodies = uuid.uuid4().hex + "0" * 8, {}
    for index in (1, 2):
        archive = runner.folder_archive(runner.valgrind_folder(7100 + index, [f"gitlab::s{index}"]), gzipped=True)
        job_id = str(990_000 + index)
        meta = runner.gitlab_metadata(
            archive,
            job_id,
            f"bench {index}/2",
            owner=owner,
            repository=repository,
            commit=commit,
            ref="refs/heads/main",
            base_ref="main",
        )
        up = runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN))
        assert up.post.status_code == 200 and up.put.status_code == 200, up.post.text
        bodies[up.post.json()["runId"], index] = up.body
    [run_id] = {run for run, _ in bodies}
    upstream_run = f"gitlab@{run_id}"
    held = wait_for(
        lambda: (
            [u for u in stack.upstream.uploads(upstream_run) if (u / "archive.tar.gz").exists()][1:]
            and stack.upstream.uploads(upstream_run)
        ),
        timeout=30,
    )
    expected = {compact(with_run_id(json.loads(body), upstream_run)) for body in bodies.values()}
    assert {(u / "post-body.json").read_bytes() for u in held} == expected  # nothing else changed
    assert stack.upstream.uploads("990001") == stack.upstream.uploads("990002") == []


@pytest.mark.slow
def test_a_re_runs_push_follows_its_own_attempts_part_not_the_earlier_one(stack, tmp_path):
    """In attempt 2 the shard showed attempt 1's part (upstream already) until the re-push was counted:
    push printed attempt 1's upstream run and returned at once."""
    run_id = f"rerun-{uuid.uuid4().hex[:8]}"
    common = ["--project", PROJECT, "--run-id", run_id, "--commit", "e" * 40, "--ref", "refs/heads/side", "--json"]
    first = _run(stack, "push", "--shard", "1/1", "--profile-folder", str(_folder(tmp_path, 1)), *common)
    assert first.returncode == 0, first.stderr
    _final(stack, PROJECT, run_id)  # its only shard: forwarded
    again = _run(stack, "push", "--shard", "1/1", "--profile-folder", str(_folder(tmp_path, 1, cost=2000)), *common)
    assert again.returncode == 0, again.stderr
    answers = [json.loads(first.stdout), json.loads(again.stdout)]
    assert answers[1]["run_id"] == f"{run_id}~2"
    parts = sorted(stack.upstream.uploads(run_id), key=lambda u: u.stat().st_mtime)
    assert [a["upstream"]["run_id"] for a in answers] == [p.name for p in parts[:2]]  # each its own part
