"""End to end: CodSpeed's runner on Buildkite (its exact requests, tests/runner.py), pointed at the
local stack by the upload URL docs/setup/buildkite.md sets (``domain.drop_in.BUILDKITE_URL``): a
build is one run, a job one shard, a URL made once for every job refused with a sentence."""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest
import requests

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from tests import runner
from tests.conftest import PARTS_PROJECT, TOKEN
from tests.factories import wait_for

FINAL = ("forwarded", "forward_failed", "closed_empty")


def _report(stack, project: str, run_id: str) -> dict:
    answer = requests.get(f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10)
    return answer.json() if answer.status_code == 200 else {}


def _final(stack, project: str, run_id: str) -> dict:
    return wait_for(lambda: (r := _report(stack, project, run_id)).get("state") in FINAL and r, timeout=60)


class Build:
    """A Buildkite build at a commit of its own, of PARTS_PROJECT (a project forwarding in parts) unless told."""

    def __init__(self, stack, project: str = PARTS_PROJECT) -> None:
        self.stack, self.id, self.commit = stack, str(uuid.uuid4()), uuid.uuid4().hex + "0" * 8
        self.project = project
        self.owner, self.repository = project.split("/")

    def url(self, step: str, job: str, index: int | str, count: int | str) -> str:
        """What the documented CODSPEED_UPLOAD_URL becomes in a job."""
        return f"{self.stack.api_url}/upload/buildkite/{self.id}/{step}/{job}/{index}/{count}"

    def runner_job(self, url: str, benchmarks: list[str], executor: str = "valgrind", pid: int = 7400) -> runner.Upload:
        if executor == "valgrind":
            archive = runner.folder_archive(runner.valgrind_folder(pid, benchmarks), gzipped=True)
        else:
            [benchmark] = benchmarks  # a walltime folder of one benchmark
            archive = runner.folder_archive(runner.walltime_folder(pid, benchmark), gzipped=False)
        meta = runner.metadata(
            archive, executor=executor, owner=self.owner, repository=self.repository, commit=self.commit,
            run_part=None, environment="BUILDKITE",
        )  # fmt: skip
        return runner.upload(self.stack.api_url, runner.Upload(meta, archive, token=TOKEN), url)

    def gate(self, *command: str, env: dict | None = None, cwd=None, timeout: int = 120) -> subprocess.CompletedProcess:
        """``codspeed-client COMMAND`` in a job of the build (the gate's, unless ``env`` says more)."""
        job = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI_", "BUILDKITE"))}
        job |= {
            "BUILDKITE": "true",  # Buildkite's documented environment of the gate's job
            "BUILDKITE_BUILD_ID": self.id,
            "BUILDKITE_REPO": f"git@github.com:{self.project}.git",
            "BUILDKITE_COMMIT": self.commit,
            "BUILDKITE_BRANCH": "main",
            "BUILDKITE_PULL_REQUEST": "false",
            "CODSPEED_AGGREGATOR_URL": self.stack.api_url,
            "CODSPEED_AGGREGATOR_TOKEN": TOKEN,
            **(env or {}),
        }
        client = [sys.executable, "-m", "codspeed_client.cli"]
        return subprocess.run([*client, *command], env=job, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def report(self) -> dict:
        return _report(self.stack, self.project, self.id)

    def runs(self) -> list:
        """The project's runs, as its listing says them."""
        listed = requests.get(
            f"{self.stack.api_url}/v1/runs/{self.project}", headers={"Authorization": TOKEN}, timeout=10
        )
        return listed.json().get("runs", []) if listed.status_code == 200 else []


def job_id() -> str:
    return str(uuid.uuid4())


@pytest.mark.slow
def test_a_buildkite_builds_runner_jobs_are_one_run_merged_in_one_upload_that_the_gate_finds(stack):
    """The case seen: three runner jobs of one build were three runs and three uploads upstream (the
    runner's upload names neither build nor job). The pipeline names them in the upload URL, as
    docs/setup/buildkite.md shows: one run, the build's id, found by the gate's close with no id
    given; one merged upload even where the project forwards in parts (the runner: "For Buildkite,
    we don't support multipart uploads"); a job retried (a new job id) replaces its own upload."""
    build = Build(stack)

    def job(index: int, benchmark: str) -> runner.Upload:
        return build.runner_job(build.url("benchmarks", job_id(), index, 3), [benchmark], pid=7400 + index)

    for index in range(2):
        sent = job(index, f"bk::first{index}")
        assert sent.put.status_code == 200 and sent.post.json()["runId"] == build.id, sent.post.text
    assert job(1, "bk::retried").put.status_code == 200  # job 2 of 3 retried: its own upload replaced
    assert job(2, "bk::third").put.status_code == 200
    closed = build.gate("close")
    assert closed.returncode == 0 and closed.stdout.startswith(f"run {build.id} ({PARTS_PROJECT})"), closed.stderr
    waited = build.gate("status", "--wait", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    report = _final(stack, PARTS_PROJECT, build.id)
    assert (report["state"], report["arrived"], report["expected"]) == ("forwarded", 3, 3)
    assert [s["label"] for s in report["shards"]] == ["benchmarks 1/3", "benchmarks 2/3", "benchmarks 3/3"]
    [upload] = stack.upstream.uploads(commit=build.commit)  # one upload, merged
    assert benchmarks_in(archive_of(upload)) == {"bk::first0", "bk::retried", "bk::third"}


def test_a_url_set_in_a_steps_env_block_names_one_job_for_all_and_the_second_archive_is_refused(stack):
    """Buildkite interpolates a step's env: block once, when the pipeline is uploaded: every job of the
    step then POSTs the upload step's ids and 0/1. Three runs' POSTs were answered 200 and one of three
    benchmarks went upstream, silently; the second archive under one job id is now refused, with the
    sentence the runner prints, and nothing the first one made changes."""
    build = Build(stack)
    url = build.url("pipeline-upload", job_id(), 0, 1)  # what every job got
    first = build.runner_job(url, ["bk::one"], pid=7401)
    assert first.put.status_code == 200, first.post.text
    assert build.gate("close").returncode == 0
    before = _final(stack, build.project, build.id)
    for pid, benchmark in ((7402, "bk::two"), (7403, "bk::three")):
        refused = build.runner_job(url, [benchmark], pid=pid)
        assert refused.post.status_code == 409 and refused.put is None
        said = refused.post.json()["error"]
        assert said.startswith("Buildkite job ") and "sent another archive before" in said, said
        assert "a step's env: block" in said and "Set CODSPEED_UPLOAD_URL in the step's command" in said, said
    assert build.report() == before  # nothing changed
    again = runner.upload(stack.api_url, runner.Upload(first.metadata, first.archive, token=TOKEN), url)  # its retry
    assert again.post.status_code == 200 and again.put.status_code == 200, again.post.text


def test_a_step_without_parallelism_is_one_job_named_by_its_key(stack):
    """The documented URL in a step without ``parallelism``: ``${BUILDKITE_PARALLEL_JOB:-0}/
    ${BUILDKITE_PARALLEL_JOB_COUNT:-1}`` is 0/1 (the bare variables made ``//``: a 404), and the step
    is named by its key, as Buildkite shows it, not by its id."""
    build = Build(stack)
    sent = build.runner_job(build.url("walltime-benchmarks", job_id(), 0, 1), ["bk::wall"], executor="walltime")
    assert sent.put.status_code == 200, sent.post.text
    [shard] = wait_for(lambda: build.report().get("arrived") and build.report()["shards"])
    assert (shard["label"], shard["executor"]) == ("walltime-benchmarks", "walltime")


def test_release_1_0_0s_url_which_names_no_job_is_still_taken(stack):
    """The API keeps what it took (semantic versioning): a pipeline not yet changed still uploads."""
    build = Build(stack)
    sent = build.runner_job(f"{stack.api_url}/upload/buildkite/{build.id}/benchmarks/0/1", ["bk::unchanged"])
    assert sent.put.status_code == 200 and sent.post.json()["runId"] == build.id, sent.post.text
    assert build.gate("close").returncode == 0
    report = _final(stack, build.project, build.id)
    assert (report["state"], [s["label"] for s in report["shards"]]) == ("forwarded", ["benchmarks"])


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("not a build/s/j/0/1", "is not a Buildkite build id"),
        ("b1/s/j/3/3", "parallel job '3' of '3' is not one of 1 to 1000"),
        ("b1/s/j/0/0", "parallel job '0' of '0' is not one of 1 to 1000"),
        ("b1/s!/j/0/1", "step 's!' is not a Buildkite step key or id"),
        ("b1/s/j!/0/1", "job 'j!' is not a Buildkite job id ($BUILDKITE_JOB_ID)"),
    ],
)
def test_a_buildkite_upload_url_that_names_no_job_is_refused_naming_the_segment_and_opens_nothing(stack, path, says):
    build = Build(stack, project=f"acme/bk-{uuid.uuid4().hex[:8]}")
    refused = build.runner_job(f"{stack.api_url}/upload/buildkite/{requests.utils.quote(path, safe='/!')}", ["bk::x"])
    assert refused.post.status_code == 422 and says in refused.post.json()["error"], refused.post.text
    assert build.runs() == []  # nothing opened


def test_a_buildkite_upload_url_given_to_another_ci_s_runner_is_refused(stack):
    build = Build(stack, project=f"acme/bk-{uuid.uuid4().hex[:8]}")
    archive = runner.recorded(1)
    part = runner.github_run_part("7044765741", "bench", "valgrind")
    meta = runner.metadata(
        archive, executor="valgrind", owner=build.owner, repository=build.repository, commit=build.commit, run_part=part
    )
    refused = runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN), build.url("s", job_id(), 0, 1))
    assert refused.post.status_code == 422
    assert refused.post.json()["error"].endswith(
        "the runner says it runs on GITHUB_ACTIONS: point only Buildkite jobs at /upload/buildkite/…"
    )
    assert build.runs() == []


def _pushed(build: Build, folder, index: int, count: int, tmp_path) -> subprocess.CompletedProcess:
    """``codspeed-client push`` in a job of a step of ``count`` parallel jobs, outside any checkout."""
    env = {
        "BUILDKITE_PARALLEL_JOB": str(index),
        "BUILDKITE_PARALLEL_JOB_COUNT": str(count),
        "BUILDKITE_LABEL": "pushed",
    }
    return build.gate("push", "--profile-folder", str(folder), env=env, cwd=tmp_path)


def _uploads(stack, build: Build) -> list[tuple[str, str | None, set[str]]]:
    """Each upload upstream for the build's commit, oldest first: (executor, its runPart, its benchmarks)."""
    found = []
    for upload in stack.upstream.uploads(commit=build.commit):
        meta = json.loads((upload / "metadata.json").read_text())
        found.append((meta["runner"]["executor"], meta.get("runPart"), benchmarks_in(archive_of(upload))))
    return found


def _by_executor(uploads: list[tuple[str, str | None, set[str]]]) -> list[tuple[str, str | None, set[str]]]:
    """An attempt's uploads by executor: its parts may be sent at once, in any order."""
    return sorted(uploads, key=lambda upload: upload[0])


def _timeline_rows(report: dict) -> list[str]:
    page = requests.get(report["page_url"], timeout=10)
    assert page.status_code == 200, page.text
    return re.findall(r'<text x="0" y="[0-9]+">([^<]*)</text>', page.text)


@pytest.mark.slow
def test_a_build_of_every_shape_goes_upstream_as_one_upload_an_executor_each_attempt(stack, tmp_path):
    """A build through the documented pipeline: a step of three valgrind runner jobs, a walltime step of
    one job (no ``parallelism``), a step of two client pushes, the gate; then a job retried after the gate
    and the gate again. CodSpeed's runner sends Buildkite uploads without run parts, so each attempt
    goes upstream as the runner's own uploads would: one an executor, no runPart, every benchmark once
    in each; the page names each shard as Buildkite shows it."""
    build = Build(stack)
    for index in range(3):
        url = build.url("benchmarks", job_id(), index, 3)
        assert build.runner_job(url, [f"bk::job{index}"], pid=7400 + index).put.status_code == 200
    walltime = build.runner_job(build.url("walltime", job_id(), 0, 1), ["bk::wall"], executor="walltime", pid=7400)
    assert walltime.put.status_code == 200, walltime.post.text
    for index in range(2):
        folder = tmp_path / f"pushed-{index}"
        for path, data in runner.valgrind_folder(7400 + index, [f"bk::pushed{index}"]).items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)
        pushed = _pushed(build, folder, index, 2, tmp_path)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert _uploads(stack, build) == []  # sent when the build is closed, not as its steps end
    assert build.gate("close").returncode == 0
    waited = build.gate("status", "--wait", "--timeout", "120")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    valgrind = {"bk::job0", "bk::job1", "bk::job2", "bk::pushed0", "bk::pushed1"}
    assert _by_executor(_uploads(stack, build)) == [("valgrind", None, valgrind), ("walltime", None, {"bk::wall"})]
    report = _final(stack, build.project, build.id)
    rows = _timeline_rows(report)
    assert sorted(rows) == ["1", "2", "benchmarks 1/3", "benchmarks 2/3", "benchmarks 3/3", "walltime"], rows

    retried = build.runner_job(build.url("benchmarks", job_id(), 1, 3), ["bk::job1"], pid=7501)
    assert retried.put.status_code == 200 and retried.post.json()["runId"] == f"{build.id}~2", retried.post.text
    assert build.gate("close").returncode == 0  # the gate retried with it
    report = wait_for(lambda: (r := build.report()).get("attempt") == 2 and r.get("state") in FINAL and r, timeout=60)
    assert report["state"] == "forwarded", report
    again = _by_executor(_uploads(stack, build)[2:])
    assert again == [("valgrind", None, valgrind), ("walltime", None, {"bk::wall"})]  # whole again, the job replaced
