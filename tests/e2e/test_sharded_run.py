"""End to end: the real client, in parallel processes, over real HTTP, through the local stack."""

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from codspeed_local.profiles import make_profile_folder
from tests.conftest import TOKEN
from tests.factories import bundle, git_commit, metadata, put, tar_gz, upload_request, wait_for

COMMIT = "5f1c2e3d4b5a69788796a5b4c3d2e1f0a9b8c7d6"


def _env(stack) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "BUILDKITE"))}
    return {**env, "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": stack.token}


def _client(stack, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "codspeed_client.cli", *args],
        env=_env(stack),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(stack, *args) -> subprocess.CompletedProcess:
    process = _client(stack, *args)
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _common(project: str, run_id: str) -> list[str]:
    return ["--project", project, "--run-id", run_id, "--commit", COMMIT]


def _report(stack, project, run_id) -> dict:
    return requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10
    ).json()


def _final(stack, project, run_id) -> dict:
    return wait_for(
        lambda: (
            (r := _report(stack, project, run_id)).get("state") in ("forwarded", "forward_failed", "closed_empty") and r
        ),
        timeout=60,
    )


def _folders(tmp_path, count, pid=4242) -> list[Path]:
    return [
        make_profile_folder(tmp_path / f"shard-{i}", pid, [f"tests/test_{i}.py::test_bench_{j}" for j in range(3)])
        for i in range(1, count + 1)
    ]


@pytest.mark.slow
def test_three_shards_pushed_in_parallel_reach_the_upstream_as_one_upload(stack, project, run_id, tmp_path):
    pushes = [
        _client(stack, "push", "--shard", f"{i}/3", "--profile-folder", str(folder), *_common(project, run_id))
        for i, folder in enumerate(_folders(tmp_path, 3), start=1)
    ]
    assert [p.wait(timeout=120) for p in pushes] == [0, 0, 0]
    waited = _run(
        stack, "status", "--wait", "--timeout", "60", "--interval", "0.2", "--format", "json", *_common(project, run_id)
    )
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "forwarded"

    [upload] = stack.upstream.uploads(run_id)
    archive = (upload / "archive.tar.gz").read_bytes()
    meta = json.loads((upload / "metadata.json").read_text())
    put_headers = {k.lower(): v for k, v in json.loads((upload / "put-headers.json").read_text()).items()}
    post_headers = {k.lower(): v for k, v in json.loads((upload / "post-headers.json").read_text()).items()}
    md5 = base64.b64encode(hashlib.md5(archive).digest()).decode()
    assert put_headers["content-md5"] == md5 == meta["profileMd5"]
    assert post_headers["authorization"] == stack.upstream_token  # the configured token, bare
    assert (
        meta["runPart"]["runPartId"] == 'codspeed-shard-aggregator-{"aggregated-pushed-part":1,"executor":"valgrind"}'
        and meta["commitHash"] == COMMIT
    )
    assert [s["runPartId"] for s in meta["runPart"]["metadata"]["aggregatedShards"]] == [
        f'codspeed-shard-aggregator-{{"aggregated-shard":"{i}","executor":"valgrind"}}' for i in (1, 2, 3)
    ]

    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = tar.getnames()
        outs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out")}
    assert len(names) == len(set(names))
    assert sorted(outs) == ["./4242.out", "./4243.out", "./4244.out"]
    for name, content in outs.items():
        assert re.findall(rb"^pid: (\d+)$", content, re.M) == [name[2:-4].encode()]
    benchmarks = {b.decode() for content in outs.values() for b in re.findall(rb"Client Request: (tests/\S+)", content)}
    assert benchmarks == {f"tests/test_{i}.py::test_bench_{j}" for i in (1, 2, 3) for j in range(3)}
    # the client's bundles were normalized by the client: verified at arrival, no copy written
    assert _normalized(stack, project, run_id) == [".index.json"] * 3


@pytest.mark.slow
def test_a_run_over_the_benchmark_limit_reaches_the_upstream_in_parts_each_merged_by_its_own_finalizer(
    stack, project, run_id, tmp_path
):
    """CodSpeed takes at most 1000 benchmarks an upload: 3 shards of 400 go as 2 parts, the second
    queued by the first finalizer and merged by another invocation, each under the finalizer's role."""
    folders = [
        make_profile_folder(tmp_path / f"shard-{i}", 4242, [f"tests/test_{i}.py::test_bench_{j}" for j in range(400)])
        for i in range(1, 4)
    ]
    pushes = [
        _client(stack, "push", "--shard", f"{i}/3", "--profile-folder", str(folder), *_common(project, run_id))
        for i, folder in enumerate(folders, start=1)
    ]
    assert [p.wait(timeout=120) for p in pushes] == [0, 0, 0]
    final = _final(stack, project, run_id)
    assert final["state"] == "forwarded" and "in 2 uploads" in final["upstream"]["message"], final["upstream"]
    uploads = stack.upstream.uploads(run_id)
    counted = []
    for upload in uploads:
        with tarfile.open(upload / "archive.tar.gz") as tar:
            counted.append(
                sum(
                    len(re.findall(rb"Client Request: tests/", tar.extractfile(m).read()))
                    for m in tar.getmembers()
                    if m.name.endswith(".out")
                )
            )
    assert len(uploads) == 2 and sorted(counted) == [400, 800] and all(c <= 1000 for c in counted)
    assert not [r for r in stack.enforcer.refusals() if r[0] == "FinalizerFunction"]


@pytest.mark.slow
def test_an_archive_made_with_tar_is_pushed_as_it_is_and_merged_with_a_folder(stack, project, run_id, tmp_path):
    folder, packed = _folders(tmp_path, 2, pid=5151)
    archive = tmp_path / "shard-2.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(packed), "."], check=True)
    assert (
        _run(stack, "push", "--shard", "1/2", "--profile-folder", str(folder), *_common(project, run_id)).returncode
        == 0
    )
    pushed = _run(stack, "push", "--shard", "2/2", "--archive", str(archive), "--json", *_common(project, run_id))
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["size"] == archive.stat().st_size
    assert _final(stack, project, run_id)["state"] == "forwarded"
    [upload] = stack.upstream.uploads(run_id)
    with tarfile.open(upload / "archive.tar.gz", mode="r:gz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".out")) == ["./5151.out", "./5152.out"]
    # tar's archive is not normalized: the arrival wrote a normalized copy of it, and only of it
    assert sorted(_normalized(stack, project, run_id)) == [".index.json", ".index.json", ".tar.gz"]


def _normalized(stack, project: str, run_id: str) -> list[str]:
    """What the arrivals wrote under normalized/ for a run's bundles: each object's suffix."""
    from codspeed_aggregator.adapters.aws import client
    from codspeed_aggregator.domain.keys import normalized_key, run_bundles_prefix

    listed = client("s3").list_objects_v2(
        Bucket=stack.resources.bucket, Prefix=normalized_key(run_bundles_prefix(project, run_id))
    )
    return [".index.json" if o["Key"].endswith(".index.json") else ".tar.gz" for o in listed.get("Contents", [])]


@pytest.mark.slow
def test_a_shard_never_pushed_is_reported_missing_after_close(stack, project, run_id, tmp_path):
    folders = _folders(tmp_path, 3)
    for i in (1, 2):
        assert (
            _run(
                stack, "push", "--shard", f"{i}/3", "--profile-folder", str(folders[i - 1]), *_common(project, run_id)
            ).returncode
            == 0
        )
    wait_for(lambda: _report(stack, project, run_id)["arrived"] == 2)
    closed = _run(stack, "close", *_common(project, run_id))
    assert closed.returncode == 0 and "closing" in closed.stdout
    waited = _run(stack, "status", "--wait", "--timeout", "60", "--interval", "0.2", *_common(project, run_id))
    assert waited.returncode == 11  # forwarded, but a shard is missing
    assert "3: missing" in waited.stdout
    assert len(stack.upstream.uploads(run_id)) == 1
    late = _run(
        stack, "push", "--shard", "3/3", "--profile-folder", str(folders[2]), "--json", *_common(project, run_id)
    )
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["run_id"] == f"{run_id}~2"  # the run's next attempt: shards 1 and 2 come along
    assert _final(stack, project, f"{run_id}~2")["arrived"] == 3
    first, again = stack.upstream.uploads(run_id)  # only what the upstream lacked: shard 3, as the group's next part
    assert [json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in (first, again)] == [
        'codspeed-shard-aggregator-{"aggregated-pushed-part":1,"executor":"valgrind"}',
        'codspeed-shard-aggregator-{"aggregated-pushed-part":2,"executor":"valgrind"}',
    ]
    with tarfile.open(again / "archive.tar.gz") as tar:
        assert sum(n.endswith(".out") for n in tar.getnames()) == 1


def _resend_s3_event(stack, key: str, size: int) -> None:
    from codspeed_aggregator.adapters.aws import client

    body = {
        "Records": [
            {
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "bucket": {"name": stack.resources.bucket},
                    "object": {"key": quote(key, safe=""), "size": size},
                },
            }
        ]
    }
    client("sqs").send_message(QueueUrl=stack.resources.arrivals_queue_url, MessageBody=json.dumps(body))


@pytest.mark.slow
def test_duplicate_events_and_a_shard_pushed_twice_count_once_and_forward_once(stack, project, run_id, tmp_path):
    folders = _folders(tmp_path, 2)
    for _ in range(2):
        assert (
            _run(
                stack, "push", "--shard", "1/2", "--profile-folder", str(folders[0]), *_common(project, run_id)
            ).returncode
            == 0
        )
    shard = wait_for(lambda: (s := _report(stack, project, run_id)["shards"][0])["attempt"] == 2 and s)
    from codspeed_aggregator.wiring import for_arrivals

    snapshot = for_arrivals().ledger.reads.snapshot(project, run_id)
    current = snapshot.shards["1"]
    for _ in range(3):
        _resend_s3_event(stack, current.key, current.size)
    first = _report(stack, project, run_id)
    assert first["arrived"] == 1 and first["partial"] is True and shard["state"] == "arrived"
    assert (
        _run(stack, "push", "--shard", "2/2", "--profile-folder", str(folders[1]), *_common(project, run_id)).returncode
        == 0
    )
    final = _final(stack, project, run_id)
    assert final["arrived"] == 2 and final["partial"] is False and final["version"] > first["version"]
    assert {s["name"]: s["attempt"] for s in final["shards"]} == {"1": 2, "2": 1}
    assert len(stack.upstream.uploads(run_id)) == 1


def _api(stack, method, path, token=TOKEN, headers=None, **kwargs) -> requests.Response:
    headers = {**({"Authorization": token} if token else {}), **(headers or {})}
    return requests.request(method, f"{stack.api_url}{path}", headers=headers, timeout=10, **kwargs)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x00not gzip", "neither gzip-compressed nor a tar archive"),
        (__import__("gzip").compress(b"plain" * 200), "gzip but not a tar archive"),
        (tar_gz({"./../../outside.out": b"x"}), "points outside the profile folder"),
    ],
)
@pytest.mark.slow
def test_a_bad_bundle_is_refused_with_its_reason_and_the_run_goes_on(stack, project, run_id, tmp_path, data, reason):
    from tests.factories import upload_request

    grant = _api(stack, "POST", "/v1/uploads", json=upload_request(project, run_id, "1", data, total=2)).json()
    assert requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=10).status_code == 200
    shard = wait_for(lambda: (s := _report(stack, project, run_id)["shards"][0])["state"] == "rejected" and s)
    assert reason in shard["reason"]
    folder = _folders(tmp_path, 2)[1]
    ref = ["--ref", "refs/heads/main"]  # the refused shard's (upload_request's), whatever branch this checkout is on
    pushed = _run(stack, "push", "--shard", "2/2", "--profile-folder", str(folder), *_common(project, run_id), *ref)
    assert pushed.returncode == 0, pushed.stderr
    wait_for(lambda: _report(stack, project, run_id)["arrived"] == 1)
    assert _run(stack, "close", *_common(project, run_id)).returncode == 0
    final = _final(stack, project, run_id)
    assert {s["name"]: s["state"] for s in final["shards"]} == {"1": "rejected", "2": "arrived"}
    assert len(stack.upstream.uploads(run_id)) == 1


def test_tokens_are_checked_before_anything_else(stack, project, run_id):
    path = f"/v1/runs/{project}/{run_id}"
    missing = _api(stack, "GET", path, token=None)
    assert missing.status_code == 401 and "missing Authorization header" in missing.json()["error"]
    wrong = _api(stack, "POST", "/v1/uploads", token="wrong", json={"nonsense": True})
    assert wrong.status_code == 403 and wrong.json() == {"error": "the token is not valid for this aggregator"}
    drop_in = _api(stack, "POST", "/upload", token="wrong", json={})
    assert drop_in.status_code == 403 and "error" in drop_in.json()
    assert _api(stack, "GET", path).status_code == 404  # nothing was created by the refused calls


def test_malformed_requests_get_422_naming_the_field(stack, project, run_id):
    from tests.factories import upload_request

    request = upload_request(project, run_id, "1", b"data", total=2)
    request["shard"] = "../escape"
    answer = _api(stack, "POST", "/v1/uploads", json=request)
    assert answer.status_code == 422 and answer.json()["error"].startswith("invalid request: shard:")
    answer = _api(stack, "POST", "/v1/uploads", data="{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and "JSON" in answer.json()["error"]
    meta = metadata("A" * 22 + "==")
    del meta["commitHash"]
    answer = _api(stack, "POST", "/upload", json=meta)
    assert answer.status_code == 422 and "commitHash" in answer.json()["error"]
    assert _api(stack, "GET", f"/v1/runs/{project}/{run_id}?format=xml").status_code == 422
    assert _api(stack, "GET", f"/v1/runs/{project}/{run_id}").status_code == 404


def test_status_prints_markdown_for_a_ci_summary(stack, project, run_id, tmp_path):
    folder = _folders(tmp_path, 1)[0]
    assert (
        _run(stack, "push", "--shard", "1/2", "--profile-folder", str(folder), *_common(project, run_id)).returncode
        == 0
    )
    wait_for(lambda: _report(stack, project, run_id)["arrived"] == 1)
    shown = _run(stack, "status", "--format", "markdown", *_common(project, run_id))
    verdict, _, first = shown.stdout.splitlines()[:3]
    assert shown.returncode == 0 and verdict == "**No change past 5% so far: 1 of 2 shards in**"
    assert "open, 1/2 shards in" in first and "partial report" in first


@pytest.mark.slow
def test_a_skipped_shard_is_carried_from_the_main_branch_run(stack, project, tmp_path):
    folders = _folders(tmp_path, 3)
    main_run, pr_run = f"main-{os.getpid()}", f"pr-{os.getpid()}"
    main = ["--project", project, "--run-id", main_run, "--commit", "1" * 40, "--ref", "refs/heads/main"]
    for i, folder in enumerate(folders, start=1):
        assert _run(stack, "push", "--shard", f"{i}/3", "--profile-folder", str(folder), *main).returncode == 0
    assert _final(stack, project, main_run)["state"] == "forwarded"
    pr = [
        "--project",
        project,
        "--run-id",
        pr_run,
        "--commit",
        "2" * 40,
        "--ref",
        "refs/pull/9/merge",
        "--base-ref",
        "main",
    ]
    for i in (1, 2):
        assert _run(stack, "push", "--shard", f"{i}/3", "--profile-folder", str(folders[i - 1]), *pr).returncode == 0
    wait_for(lambda: _report(stack, project, pr_run)["arrived"] == 2)
    assert _run(stack, "close", "--skip", "3", *pr).returncode == 0
    waited = _run(stack, "status", "--wait", "--timeout", "60", "--interval", "0.2", "--format", "json", *pr)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    report = json.loads(waited.stdout)
    carried = {s["name"]: s for s in report["shards"]}["3"]
    assert carried["state"] == "carried" and carried["source"] == {"run_id": main_run, "commit": "1" * 40}
    assert report["baseline"]["run_id"] == main_run and report["missing_benchmarks"] == []
    [upload] = stack.upstream.uploads(pr_run)
    assert json.loads((upload / "metadata.json").read_text())["runPart"]["metadata"]["carriedShards"] == {
        "3": {"runId": main_run, "commitHash": "1" * 40}
    }


@pytest.mark.slow
def test_a_report_too_large_to_answer_inline_is_served_from_s3_and_the_client_follows(
    stack, project, run_id, tmp_path, monkeypatch
):
    from dataclasses import replace

    from codspeed_aggregator import wiring

    folders = _folders(tmp_path, 2)
    for i in (1, 2):
        assert (
            _run(
                stack, "push", "--shard", f"{i}/2", "--profile-folder", str(folders[i - 1]), *_common(project, run_id)
            ).returncode
            == 0
        )
    inline = _final(stack, project, run_id)
    api = wiring.for_api()
    monkeypatch.setattr(api, "settings", replace(api.settings, report_inline_bytes=200))  # both formats are over
    for fmt, content_type in (("json", "application/json"), ("markdown", "text/markdown")):
        answer = requests.get(
            f"{stack.api_url}/v1/runs/{project}/{run_id}",
            params={"format": fmt},
            headers={"Authorization": TOKEN},
            allow_redirects=False,
            timeout=10,
        )
        assert answer.status_code == 303 and "X-Amz-Signature=" in answer.headers["Location"]
        assert not answer.headers["Location"].startswith(stack.api_url)  # the bucket, not Lambda, sends the bytes
        followed = requests.get(answer.headers["Location"], timeout=10)
        assert followed.status_code == 200 and followed.headers["content-type"].startswith(content_type)
        if fmt == "json":
            assert followed.json()["version"] == inline["version"] and followed.json()["arrived"] == 2
    page = requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}",
        params={"shard": "1"},
        headers={"Authorization": TOKEN},
        allow_redirects=False,
        timeout=10,
    )
    assert page.status_code == 303 and "X-Amz-Signature=" in page.headers["Location"]  # a shard's page too
    assert [b["name"] for b in requests.get(page.headers["Location"], timeout=10).json()["benchmarks"]] == [
        f"tests/test_1.py::test_bench_{j}" for j in range(3)
    ]
    again = requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}",
        params={"shard": "1"},
        headers={"Authorization": TOKEN},
        allow_redirects=False,
        timeout=10,
    )
    key = _object_key(again.headers["Location"])
    assert key.startswith("reports/") and "/~answers/" in key and key == _object_key(page.headers["Location"])
    from codspeed_aggregator.adapters import aws

    versions = aws.client("s3").list_object_versions(Bucket=stack.resources.bucket, Prefix=key)["Versions"]
    assert len(versions) == 1  # the same answer is written once, not again at each GET
    listed = _run(stack, "status", "--format", "json", "--benchmarks", *_common(project, run_id))
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["benchmarks"]) == 6, listed.stderr
    status = _run(stack, "status", "--format", "json", *_common(project, run_id))  # the client follows the link
    assert status.returncode == 0 and json.loads(status.stdout)["version"] == inline["version"], status.stderr
    markdown = _run(stack, "status", "--format", "markdown", *_common(project, run_id))
    assert markdown.returncode == 0 and markdown.stdout.splitlines()[2].startswith("CodSpeed shards for"), (
        markdown.stderr
    )


@pytest.mark.slow
def test_status_lists_every_benchmark_shard_by_shard_with_benchmarks(stack, project, run_id, tmp_path):
    for i, folder in enumerate(_folders(tmp_path, 2), start=1):
        assert (
            _run(
                stack, "push", "--shard", f"{i}/2", "--profile-folder", str(folder), *_common(project, run_id)
            ).returncode
            == 0
        )
    assert _final(stack, project, run_id)["state"] == "forwarded"
    plain = json.loads(_run(stack, "status", "--format", "json", *_common(project, run_id)).stdout)
    assert plain["benchmarks"] == [] and plain["counts"]["measured"] == 6 and plain["counts"]["new"] == 6  # a summary
    listed = json.loads(_run(stack, "status", "--format", "json", "--benchmarks", *_common(project, run_id)).stdout)
    names = [f"tests/test_{i}.py::test_bench_{j}" for i in (1, 2) for j in range(3)]
    assert sorted(b["name"] for b in listed["benchmarks"]) == names
    assert {(b["shard"], b["state"]) for b in listed["benchmarks"]} == {("1", "measured"), ("2", "measured")}
    text = _run(stack, "status", "--benchmarks", *_common(project, run_id)).stdout
    assert "benchmarks: 0 regressions, 0 improvements, 0 unchanged, 6 new (threshold 5%)" in text
    assert all(f"  {name} ({name[11]}): measured" in text for name in names)
    refused = _run(stack, "status", "--benchmarks", "--format", "markdown", *_common(project, run_id))
    assert refused.returncode == 2 and refused.stdout == ""
    assert "--benchmarks lists benchmarks in text or JSON" in refused.stderr


def _push_bundle(stack, project, run_id, shard, data, total, **meta) -> None:
    answer = requests.post(
        f"{stack.api_url}/v1/uploads",
        json=upload_request(project, run_id, shard, data, total=total, **meta),
        headers={"Authorization": stack.token},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    put(answer.json(), data)


def _costed(index: int, cost: int) -> bytes:
    names = [f"tests/test_gate{index}.py::test_{j}" for j in range(2)]
    return bundle(200 + index, names, costs={name: cost for name in names})


@pytest.mark.slow
def test_status_fails_on_a_regression_past_the_threshold_with_its_own_exit_code(stack, project):
    for index in (1, 2):  # the baseline, forwarded on main
        _push_bundle(stack, project, "main-gate", str(index), _costed(index, 1000), 2)
    assert _final(stack, project, "main-gate")["state"] == "forwarded"
    pull = {"ref": "refs/pull/3/merge", "base_ref": "main", "commit": "c" * 40}
    _push_bundle(stack, project, "pr-gate", "1", _costed(1, 1300), 2, **pull)  # 30% slower
    _push_bundle(stack, project, "pr-gate", "2", _costed(2, 1030), 2, **pull)  # 3%: under the stack's 5%
    pr = ["--project", project, "--run-id", "pr-gate", "--commit", "c" * 40]
    gated = _run(stack, "status", "--wait", "--timeout", "60", "--interval", "0.2", "--fail-on-regression", *pr)
    assert gated.returncode == 13, gated.stdout + gated.stderr
    assert gated.stderr.strip() == (
        "codspeed-client: exit 13: 2 benchmarks regressed past 5% against the baseline: "
        "worst tests/test_gate1.py::test_0 +30.0%"
    )
    assert "2 regressions (worst +30.0%), 0 improvements, 2 unchanged" in gated.stdout
    strict = _run(stack, "status", "--fail-on-regression", "1%", *pr)  # under the stack's threshold: every shard's page
    assert strict.returncode == 13 and "4 benchmarks regressed past 1%" in strict.stderr, strict.stderr
    assert _run(stack, "status", "--fail-on-regression", "40", *pr).returncode == 0
    assert (
        _run(stack, "status", "--fail-on-regression", *["--project", project, "--run-id", "main-gate"]).returncode == 0
    )


def test_a_token_pasted_with_its_line_break_works_and_one_no_header_can_carry_is_refused(stack, project, run_id):
    def close_with(token: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "codspeed_client.cli", "close", *_common(project, run_id)],
            env={**_env(stack), "CODSPEED_AGGREGATOR_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )

    for pasted_as in (stack.token + "\n", f"Bearer {stack.token}"):  # "Bearer tok": as its header says it
        pasted = close_with(pasted_as)
        assert pasted.returncode not in (3, 4, 6) and "token" not in pasted.stderr, pasted.stderr  # reached it
    for bad in ("to ken", "tök\u00e9n", "tok\u2028en"):
        refused = close_with(bad)
        assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stderr
        assert "which an HTTP header cannot carry" in refused.stderr


@pytest.mark.slow
def test_a_pull_request_compares_with_main_at_its_merge_base_while_main_moved_on(stack, project, tmp_path):
    """The client in a GitHub Actions pull-request job whose clone holds the history: the event's
    base.sha is main's tip, and the baseline is main's run where the branch left it."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    fork_point = git_commit(repo, "main before the branch")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "feature"], check=True)
    head = git_commit(repo, "the change")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    tip = git_commit(repo, "main moved on")
    for run_id, commit, cost in (
        (f"mb-main-1-{os.getpid()}", fork_point, 1000),
        (f"mb-main-2-{os.getpid()}", tip, 2000),
    ):
        _push_bundle(stack, project, run_id, "1", _costed(1, cost), 1, commit=commit)
        assert _final(stack, project, run_id)["state"] == "forwarded"
    report = _pull_request_run(stack, project, tmp_path, repo, f"mb-pr-{os.getpid()}", head, tip)
    assert report["baseline"]["commit"] == fork_point
    assert report["baseline"]["why"] == f"main's run at the change's base commit {fork_point[:12]}"
    assert report["counts"]["regressions"] == 2 and round(report["counts"]["worst_regression"], 2) == 0.1  # not -45%
    unbenchmarked = git_commit(repo, "main, never benchmarked")  # a branch leaves from here: its parent has a run
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "later"], check=True)
    later = _pull_request_run(
        stack, project, tmp_path, repo, f"mb-pr-2-{os.getpid()}", git_commit(repo, "another"), unbenchmarked
    )
    assert later["baseline"]["commit"] == tip and later["baseline"]["why"] == (
        f"main's run at {tip[:12]}, 1 commit before the change's base commit {unbenchmarked[:12]}: the nearest with a "
        "run"
    )


def pull_request_env(  # noqa: PLR0913 -- what GitHub's pull_request event says, each its own
    stack, tmp_path, project, run_id: str, repo, head: str, base_sha: str, number: int, job: str
) -> dict:
    """A GitHub Actions pull_request job's environment, its checkout ``repo`` (``base_sha`` is the
    event's base.sha, the base branch's tip), with its event payload written under ``tmp_path``."""
    event = tmp_path / f"{run_id}-{job}.json"  # GitHub's pull_request payload, as the job reads it
    owner = {"full_name": project}
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": number,
                    "head": {"sha": head, "ref": "feature", "repo": owner},
                    "base": {"sha": base_sha, "ref": "main", "repo": owner},
                }
            }
        )
    )
    return {
        **_env(stack),
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": project,
        "GITHUB_RUN_ID": run_id,
        "GITHUB_SHA": "e" * 40,
        "GITHUB_REF": f"refs/pull/{number}/merge",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_JOB": job,
        "GITHUB_WORKSPACE": str(repo),
    }


def _pull_request_run(stack, project, tmp_path, repo, run_id: str, head: str, tip: str) -> dict:
    """The client pushing a GitHub pull request's one shard in its checkout, as actions/checkout leaves
    it (``refs/pull/N/merge``: GitHub's merge commit of ``head`` into ``tip``, its base.sha), from a clone
    that holds the history (``repo``, left on the branch it was on): the run's final report."""
    git = ["git", "-C", str(repo), "-c", "user.email=gh@example.com", "-c", "user.name=GitHub"]
    branch = subprocess.run([*git, "branch", "--show-current"], capture_output=True, text=True).stdout.strip()
    subprocess.run([*git, "checkout", "-q", "--detach", tip], check=True)
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", f"Merge {head} into {tip}", head], check=True)
    merge = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    env = pull_request_env(stack, tmp_path, project, run_id, repo, head, tip, number=5, job="bench")
    names = [f"tests/test_gate1.py::test_{j}" for j in range(2)]
    folder = make_profile_folder(tmp_path / run_id, 201, names, costs={n: 1100 for n in names})
    pushed = subprocess.run(
        [sys.executable, "-m", "codspeed_client.cli", "push", "--shard", "1/1", "--profile-folder", str(folder)],
        env={**env, "GITHUB_SHA": merge},
        cwd=repo,  # a job's steps run in its workspace
        capture_output=True,
        text=True,
        timeout=120,
    )
    subprocess.run([*git, "checkout", "-q", branch], check=True)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    report = _final(stack, project, run_id)
    assert (report["commit"], report["head_commit"]) == (merge, head)  # sent as the runner would; shown: the head
    return report


def _object_key(presigned: str) -> str:
    """The key a presigned GET URL names (path-style: /bucket/key)."""
    return requests.utils.unquote(requests.utils.urlparse(presigned).path.split("/", 2)[2])


def test_a_path_written_percent_encoded_reads_the_same_run_and_an_encoded_slash_is_no_run_id(stack):
    """API Gateway hands the path as it was sent: ``r%2B1%3Ax`` and GitLab's ``group%2Fsub%2Frepo``
    were a 404 where the same path unencoded is a 200."""
    import uuid

    project, run_id = f"platform/perf/engine-{uuid.uuid4().hex[:6]}", "r+1:x"
    data = bundle(4242, ["enc::a"])
    granted = requests.post(
        f"{stack.api_url}/v1/uploads",
        headers={"Authorization": TOKEN},
        timeout=10,
        json=upload_request(project, run_id, "1", data, total=2),
    )
    assert granted.status_code == 201, granted.text
    put(granted.json(), data)

    def read(path: str) -> requests.Response:
        return requests.get(f"{stack.api_url}/v1/runs/{path}", headers={"Authorization": TOKEN}, timeout=10)

    plain = wait_for(lambda: (r := read(f"{project}/{run_id}")).status_code == 200 and r.json()["arrived"] == 1 and r)
    for path in (
        f"{project}/{quote(run_id, safe='')}",
        f"{quote(project, safe='')}/{quote(run_id, safe='')}",
        f"{quote(project, safe='')}/{run_id}",
    ):
        answer = read(path)
        assert answer.status_code == 200 and answer.json()["run_id"] == run_id, (path, answer.text)
        assert answer.json()["version"] >= plain.json()["version"]
    slashed = read(f"{project}/{quote('r+1/x', safe='')}")  # a '/' inside a run id never reaches a route's key
    assert slashed.status_code == 422 and "'r+1/x' is not a run id: it holds '/'" in slashed.json()["error"], (
        slashed.text
    )
