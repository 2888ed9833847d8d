"""End to end: a run declared before any shard runs (``codspeed-client open``), with the real
client, through the local stack."""

import json
import os
import re
from pathlib import Path

import pytest

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from tests import runner
from tests.conftest import TOKEN
from tests.e2e.test_sharded_run import _final, _folders, _report, _run
from tests.factories import wait_for

MAIN = ["--commit", "1" * 40, "--ref", "refs/heads/main"]
PR = ["--commit", "2" * 40, "--ref", "refs/pull/9/merge", "--base-ref", "main"]


def _states(report: dict) -> dict[str, str]:
    return {s["name"]: s["state"] for s in report["shards"]}


@pytest.mark.slow
def test_a_run_opened_with_a_skip_shows_every_shard_before_any_push_and_is_forwarded_when_the_others_are_in(
    stack, project, tmp_path
):
    folders = _folders(tmp_path, 4)
    main_run, pr_run = f"open-main-{os.getpid()}", f"open-pr-{os.getpid()}"
    main = ["--project", project, "--run-id", main_run, *MAIN]
    for i, folder in enumerate(folders, start=1):
        assert _run(stack, "push", "--shard", f"{i}/4", "--profile-folder", str(folder), *main).returncode == 0
    assert _final(stack, project, main_run)["state"] == "forwarded"

    pr = ["--project", project, "--run-id", pr_run, *PR]
    opened = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)
    assert opened.returncode == 0, opened.stderr
    assert (
        opened.stdout.strip()
        == f"run {pr_run} ({project}): open: opened: 4 shards expected, 1 skipped (carried from the baseline run)"
    )
    before = _report(stack, project, pr_run)
    assert _states(before) == {"1": "expected", "2": "expected", "3": "skipped", "4": "expected"}
    assert before["arrived"] == 0 and before["counts"]["running"] == 9 and before["counts"]["carried"] == 3
    assert {s["name"]: s["reason"] for s in before["shards"]}["3"].startswith(
        "skipped on purpose when the run was opened"
    )

    refused = _run(stack, "push", "--shard", "3/4", "--profile-folder", str(folders[2]), *pr)
    assert (
        refused.returncode == 5
        and (f"shard 3 was declared skipped when it was opened (run {pr_run} of {project})") in refused.stderr
    ), refused.stderr
    again = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)  # a CI re-run of the planning job
    assert again.returncode == 0 and "already open as declared" in again.stdout, again.stdout + again.stderr
    other = _run(stack, "open", "--shards", "4", *pr)
    assert other.returncode == 5 and (
        "was opened expecting 4 shards, skipping 3; this open declares 4 shards, skipping none" in other.stderr
    ), other.stderr
    assert _report(stack, project, pr_run)["version"] == before["version"]  # refused: nothing changed

    for i in (1, 2, 4):
        assert _run(stack, "push", "--shard", f"{i}/4", "--profile-folder", str(folders[i - 1]), *pr).returncode == 0
    final = _final(stack, project, pr_run)  # complete without a close: the skip was declared
    assert final["state"] == "forwarded" and final["arrived"] == 3, final
    carried = {s["name"]: s for s in final["shards"]}["3"]
    assert carried["state"] == "carried" and carried["source"] == {"run_id": main_run, "commit": "1" * 40}
    [upload] = stack.upstream.uploads(pr_run)
    assert json.loads((upload / "metadata.json").read_text())["runPart"]["metadata"]["carriedShards"] == {
        "3": {"runId": main_run, "commitHash": "1" * 40}
    }
    done = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)
    assert done.returncode == 0 and "already forwarded: open changes nothing" in done.stdout, done.stdout + done.stderr
    assert len(stack.upstream.uploads(pr_run)) == 1


def test_open_refuses_what_it_cannot_declare_in_one_sentence(stack, project, run_id):
    common = ["--project", project, "--run-id", run_id, *PR]
    for args, says in [
        (
            [],
            "say which shards the run has: --shards N (shards 1 to N) or --expect a,b,c, and --job NAME=N for each "
            "job whose CodSpeed runner uploads to the aggregator",
        ),
        (
            ["--job", "bench=2", "--skip", "1"],
            "--skip names shards of --shards or --expect: a job that does not run is left out of --job",
        ),
        (["--job", "bench=0"], "--job 'bench=0': give a job's name, and how many of it run (NAME=N, N at least 1)"),
        (["--job", "bench", "--job", "bench=2"], "--job bench is given twice"),
        (["--shards", "2", "--expect", "a,b"], "say which shards the run has"),
        (["--shards", "0"], "--shards 0: a run has 1 shard or more"),
        (["--shards", "3", "--skip", "4"], "--skip 4: not among the run's shards (1,2,3)"),
        (["--expect", "a,a"], "--expect a,a names a shard twice"),
    ]:
        refused = _run(stack, "open", *args, *common)
        assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert _report(stack, project, run_id).get("state") is None  # nothing was opened


def test_a_run_of_every_shard_skipped_with_nothing_to_carry_says_so_when_opened_and_ends_empty(stack, project, run_id):
    opened = _run(stack, "open", "--shards", "2", "--skip", "1,2", "--project", project, "--run-id", run_id, *PR)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == (
        f"run {run_id} ({project}): open: opened: 2 shards expected, all 2 skipped: no run of main was forwarded to "
        "carry them from, so nothing is forwarded (closed_empty)"
    )
    final = _final(stack, project, run_id)
    assert final["state"] == "closed_empty" and final["arrived"] == 0, final
    assert {s["name"]: s["state"] for s in final["shards"]} == {"1": "skipped", "2": "skipped"}
    assert stack.upstream.uploads(run_id) == []


def _runner_upload(stack, gh_run: str, project: str, job: str, index: int | None = None, total: int | None = None):
    """One job's upload as CodSpeed's runner sends it (tests/runner.py): a matrix job's when ``total``."""
    owner, repository = project.rsplit("/", 1)
    archive = runner.recorded(3 if index is None else index + 1)  # three recordings, a benchmark each
    matrix = {"matrix": {"shard": index}, "job_index": index, "job_total": total} if total else {}
    part = runner.github_run_part(gh_run, job, "valgrind", **matrix)
    return runner.upload(
        stack.api_url,
        runner.Upload(
            runner.metadata(
                archive, executor="valgrind", owner=owner, repository=repository, commit=MAIN[1], run_part=part
            ),
            archive,
            token=TOKEN,
        ),
    )


@pytest.mark.slow
def test_a_codspeed_workflows_jobs_declared_by_name_are_waited_for_and_another_job_is_refused(stack, project):
    gh_run = str(7_100_000_000 + os.getpid())
    opened = _run(stack, "open", "--job", "bench=2", "--job", "memory", "--project", project, "--run-id", gh_run, *MAIN)
    assert opened.returncode == 0, opened.stderr
    assert (
        opened.stdout.strip()
        == f"run {gh_run} ({project}): open: opened: 2 shards in job bench; 1 shard in job memory expected"
    )
    declared = _report(stack, project, gh_run)
    assert declared["expected"] == 3 and [(s["name"], s["state"], s["display"]) for s in declared["shards"]] == [
        ("job:bench", "expected", "bench: 2 of 2 to come"),
        ("job:memory", "expected", "memory: 1 of 1 to come"),
    ]

    assert _runner_upload(stack, gh_run, project, "memory").put.status_code == 200  # a group of one, complete alone
    arrived = wait_for(lambda: (r := _report(stack, project, gh_run))["arrived"] == 1 and r)
    assert arrived["state"] == "open"  # undeclared, the run would be forwarded now with one job of two in
    assert [s["state"] for s in arrived["shards"]] == ["arrived", "expected"] and arrived["shards"][1][
        "name"
    ] == "job:bench"
    before = arrived["version"]
    other = _runner_upload(stack, gh_run, project, "lint")
    assert other.post.status_code == 409 and other.post.json() == {
        "error": (
            f"job lint is not among what run {gh_run} of {project} was opened expecting (2 shards in job bench; "
            "1 shard in job memory)"
        )
    }, other.post.text
    assert _report(stack, project, gh_run)["version"] == before  # refused: nothing changed

    for index in (0, 1):
        assert _runner_upload(stack, gh_run, project, "bench", index, 2).put.status_code == 200
    final = _final(stack, project, gh_run)
    assert final["state"] == "forwarded" and final["arrived"] == 3, final
    assert stack.upstream.uploads(gh_run)


@pytest.mark.slow
def test_a_shard_carried_alone_beside_a_job_goes_under_its_own_run_part_not_the_jobs(stack, project, tmp_path):
    [folder] = _folders(tmp_path, 1, pid=777)
    main_run, gh_run = f"alone-main-{os.getpid()}", str(7_200_000_000 + os.getpid())
    assert (
        _run(
            stack,
            "push",
            "--shard",
            "1/1",
            "--profile-folder",
            str(folder),
            "--project",
            project,
            "--run-id",
            main_run,
            *MAIN,
        ).returncode
        == 0
    )
    assert _final(stack, project, main_run)["state"] == "forwarded"

    opened = _run(
        stack,
        "open",
        "--shards",
        "1",
        "--skip",
        "1",
        "--job",
        "bench",
        "--project",
        project,
        "--run-id",
        gh_run,
        "--commit",
        MAIN[1],
        "--ref",
        "refs/heads/feature",
        "--base-ref",
        "main",
    )
    assert opened.returncode == 0, opened.stderr
    owner, repository = project.rsplit("/", 1)
    archive = runner.recorded(1)
    part = runner.github_run_part(gh_run, "bench", "valgrind")
    assert (
        runner.upload(
            stack.api_url,
            runner.Upload(
                runner.metadata(
                    archive,
                    executor="valgrind",
                    owner=owner,
                    repository=repository,
                    commit=MAIN[1],
                    ref="refs/heads/feature",
                    run_part=part,
                ),
                archive,
                token=TOKEN,
            ),
        ).put.status_code
        == 200
    )
    final = _final(stack, project, gh_run)
    assert final["state"] == "forwarded" and {s["state"] for s in final["shards"]} == {"arrived", "carried"}, final
    parts = stack.upstream.combined(project)[(project, gh_run)]  # as CodSpeed holds the run: the last of each runPartId
    carried = 'codspeed-shard-aggregator-{"aggregated-shard":"1","executor":"valgrind"}'  # the shard's own part
    assert sorted(parts) == [part["runPartId"], carried]
    held = {part_id: benchmarks_in(archive_of(upload)) for part_id, upload in parts.items()}
    assert held[carried] == {f"tests/test_1.py::test_bench_{j}" for j in range(3)} and len(held[part["runPartId"]]) == 1


GITLAB_DOCS = Path(__file__).resolve().parents[2] / "docs" / "setup" / "gitlab.md"
GITLAB_MR_REF = "refs/pull/3/merge"  # what the runner sends as a merge request pipeline's ref


def _gitlab_job(stack, project: str, commit: str, name: str) -> dict[str, str]:
    """A job of merge request 3's pipeline 8812, as GitLab's environment says it."""
    from tests.e2e.test_sharded_run import _env

    return {
        **_env(stack),
        "GITLAB_CI": "true",
        "CI_PROJECT_PATH": project,
        "CI_PIPELINE_ID": "8812",
        "CI_COMMIT_SHA": commit,
        "CI_COMMIT_REF_NAME": "feature",
        "CI_JOB_NAME": name,
        "CI_JOB_ID": str(990_000 + len(name)),
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "3",
    }


def _client(environment: dict[str, str], *args: str):
    import subprocess
    import sys

    command = [sys.executable, "-m", "codspeed_client.cli", *args]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=180)


def _gitlab_runner_job(stack, project: str, commit: str, name: str, pid: int):
    """A CodSpeed runner job of that pipeline uploading through the drop-in, as the runner does."""
    group, repository = project.rsplit("/", 1)
    archive = runner.folder_archive(runner.valgrind_folder(pid, [f"{name}::b"]), gzipped=True)
    job_id = str(990_100 + pid)
    meta = runner.gitlab_metadata(
        archive,
        job_id,
        name,
        owner=group,
        repository=repository,
        commit=commit,
        ref=GITLAB_MR_REF,
        head_ref="feature",
        base_ref="main",
        event="pull_request",
    )
    return runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN))


@pytest.mark.slow
def test_a_gitlab_pipelines_runner_jobs_declared_by_name_count_in_the_run_of_their_commit_and_ref(stack):
    """GitLab's runner names no run its jobs share (each runPart is a job's): the run the open
    declares is theirs, by commit and ref, and it waits for every job declared."""
    import uuid

    from codspeed_rules.names import gitlab_runner_run_id

    project, commit = f"platform/perf/engine-{uuid.uuid4().hex[:6]}", "4" * 40
    opened = _client(_gitlab_job(stack, project, commit, "plan"), "open", "--job", "bench=2", "--job", "lint")
    run_id = gitlab_runner_run_id(commit, GITLAB_MR_REF)
    assert opened.returncode == 0, opened.stdout + opened.stderr
    assert opened.stdout.strip() == (
        f"run {run_id} ({project}): open: opened: 2 shards in job bench; 1 shard in job lint expected"
    )
    assert _gitlab_runner_job(stack, project, commit, "lint", 7001).put.status_code == 200
    wait_for(lambda: _report(stack, project, run_id).get("arrived") == 1)
    assert _report(stack, project, run_id)["state"] == "open"  # lint alone would be a run complete, undeclared
    for pid, name in ((7002, "bench 1/2"), (7003, "bench 2/2")):
        assert _gitlab_runner_job(stack, project, commit, name, pid).put.status_code == 200
    final = _final(stack, project, run_id)
    assert (final["state"], final["arrived"], final["expected"]) == ("forwarded", 3, 3)


@pytest.mark.slow
def test_a_gitlab_gate_finds_the_run_its_pipelines_runner_jobs_made_with_no_id_copied(stack):
    """The case seen: after open --job bench=2 and the runner jobs, the gate's close answered "404 no
    run 8812" (the pipeline's id) and status "did not appear within 20 s"; it worked only with the
    gl-… id copied by hand from open's output. One of the two jobs crashed: the gate says so."""
    import uuid

    from codspeed_rules.names import gitlab_runner_run_id

    project, commit = f"platform/perf/gate-{uuid.uuid4().hex[:6]}", "5" * 40
    run_id = gitlab_runner_run_id(commit, GITLAB_MR_REF)
    assert _client(_gitlab_job(stack, project, commit, "plan"), "open", "--job", "bench=2").returncode == 0
    assert _gitlab_runner_job(stack, project, commit, "bench 1/2", 7101).put.status_code == 200  # 2/2 crashed

    documented = re.search(r"<!-- docs-check: gitlab-runner -->\n```yaml\n(.*?)```", GITLAB_DOCS.read_text(), re.S)[1]
    assert "    - codspeed-client open --job bench=2\n" in documented
    assert "    - codspeed-client close\n    - codspeed-client status --wait --fail-on-regression 5\n" in documented
    gate = _gitlab_job(stack, project, commit, "gate")
    closed = _client(gate, "close")
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.startswith(f"run {run_id} ({project}): closing: the run ends")
    waited = _client(gate, "status", "--wait", "--timeout", "120", "--fail-on-regression", "5")
    assert waited.returncode == 11, waited.stdout + waited.stderr
    assert waited.stderr == "codspeed-client: exit 11: 1 shard missing, never came: bench: 1 of 2 never came\n"
    assert f"run {run_id}" in waited.stdout or run_id in waited.stdout

    elsewhere = _gitlab_job(stack, project, "6" * 40, "gate")  # a pipeline none of whose jobs uploaded
    refused = _client(elsewhere, "close")
    assert refused.returncode == 5
    assert refused.stderr.strip().endswith(
        f"no run 8812 (this pipeline's pushed shards) nor {gitlab_runner_run_id('6' * 40, GITLAB_MR_REF)} (its "
        f"CodSpeed runner jobs, by commit and ref) for {project}: did any job upload to the aggregator?"
    )


@pytest.mark.slow
def test_a_refused_tokenless_upload_for_an_undeclared_job_changes_nothing(stack):
    """Anyone can send a tokenless upload naming a public pull request's run: refused, it must not
    switch the run's comment and baseline role off (it was marked tokenless before the checks)."""
    from tests.conftest import TOKENLESS_PROJECT
    from tests.factories import footprint

    project, gh_run = TOKENLESS_PROJECT, str(7_300_000_000 + os.getpid())
    opened = _run(stack, "open", "--job", "bench", "--project", project, "--run-id", gh_run, *PR)
    assert opened.returncode == 0, opened.stderr
    owner, repository = project.rsplit("/", 1)

    def tokenless(job: str):
        archive = runner.recorded(1)
        return runner.upload(
            stack.api_url,
            runner.Upload(
                runner.metadata(
                    archive,
                    executor="valgrind",
                    owner=owner,
                    repository=repository,
                    commit=PR[1],
                    ref=PR[3],
                    base_ref="main",
                    event="pull_request",
                    tokenless=True,
                    run_part=runner.github_run_part(gh_run, job, "valgrind"),
                ),
                archive,
                token=None,
            ),
        )

    before = footprint(stack, project, gh_run)
    refused = tokenless("lint")
    assert refused.post.status_code == 409 and "job lint is not among what run" in refused.post.json()["error"]
    assert footprint(stack, project, gh_run) == before
    assert tokenless("bench").post.status_code == 200  # the job it declared: taken, and the run marked tokenless
    assert footprint(stack, project, gh_run) != before


@pytest.mark.slow
def test_a_declared_run_refuses_an_undeclared_job_after_its_forward_too_and_opens_no_attempt(stack, project):
    from tests.factories import footprint

    gh_run = str(7_400_000_000 + os.getpid())
    assert _run(stack, "open", "--job", "bench", "--project", project, "--run-id", gh_run, *MAIN).returncode == 0
    assert _runner_upload(stack, gh_run, project, "bench").put.status_code == 200
    assert _final(stack, project, gh_run)["state"] == "forwarded"
    before = footprint(stack, project, gh_run)
    late = _runner_upload(stack, gh_run, project, "lint")
    assert late.post.status_code == 409, late.post.text
    assert (
        late.post.json()["error"]
        == f"job lint is not among what run {gh_run} of {project} was opened expecting (1 shard in job bench)"
    )
    assert footprint(stack, project, gh_run) == before  # no attempt ~2, nothing else
    rerun = _runner_upload(stack, gh_run, project, "bench")  # a re-run of the declared job still opens the next attempt
    assert rerun.post.status_code == 200 and rerun.post.json()["runId"] == f"{gh_run}~2"
