"""End to end: ``codspeed-client plan`` in a GitHub pull-request job, on a fixture repository with
a shard config: the matrix and the skip list from what the change touched, the run opened with
them, and the matrix's shards forwarded with the others carried from main."""

import json
import os
import subprocess
import sys

import pytest

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from tests.e2e.test_sharded_run import _final, _folders, _report, _run, pull_request_env
from tests.factories import git_commit

SHARDS = ["linter", "parser", "codegen", "minifier"]
CONFIG = """
always = ["Cargo.lock"]

[shards.linter]
paths = ["crates/oxc_linter/**"]

[shards.parser]
paths = ["crates/oxc_parser/**"]

[shards.codegen]
paths = ["crates/oxc_codegen/**"]

[shards.minifier]
paths = ["crates/oxc_minifier/**"]
"""


def _repository(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / ".codspeed").mkdir()
    (repo / ".codspeed" / "shards.toml").write_text(CONFIG)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    fork_point = git_commit(repo, "the shard config")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "feature"], check=True)
    for path in ("crates/oxc_linter/src/rules.rs", "crates/oxc_parser/src/lexer.rs", "README.md"):  # 3 changed paths
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("changed\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    head = git_commit(repo, "the change")
    return repo, fork_point, head


def _main_ran_every_shard(stack, project: str, main_run: str, tmp_path) -> dict:
    """A run of main that pushed every shard, forwarded; answers each shard's profile folder."""
    folders = dict(zip(SHARDS, _folders(tmp_path, len(SHARDS)), strict=False))
    for name, folder in folders.items():
        assert (
            _run(
                stack,
                "push",
                "--shard",
                name,
                "--expect",
                ",".join(SHARDS),
                "--profile-folder",
                str(folder),
                "--project",
                project,
                "--run-id",
                main_run,
                "--commit",
                "1" * 40,
                "--ref",
                "refs/heads/main",
            ).returncode
            == 0
        )
    assert _final(stack, project, main_run)["state"] == "forwarded"
    return folders


@pytest.mark.slow
def test_plan_gives_the_matrix_and_the_skips_of_a_change_and_opens_the_run_with_them(stack, project, tmp_path):
    main_run, pr_run = f"plan-main-{os.getpid()}", f"plan-pr-{os.getpid()}"
    folders = _main_ran_every_shard(stack, project, main_run, tmp_path)

    repo, fork_point, head = _repository(tmp_path)
    outputs = tmp_path / "github-output"
    env = {
        **pull_request_env(stack, tmp_path, project, pr_run, repo, head, fork_point, number=8, job="plan"),
        "GITHUB_OUTPUT": str(outputs),
    }
    planned = subprocess.run(
        [sys.executable, "-m", "codspeed_client.cli", "plan", "--open"],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert planned.stdout.splitlines() == [
        "runs linter: crates/oxc_linter/src/rules.rs changed",
        "runs parser: crates/oxc_parser/src/lexer.rs changed",
        "skips codegen: no change under crates/oxc_codegen/**",
        "skips minifier: no change under crates/oxc_minifier/**",
        f"run {pr_run} ({project}): open: opened: shards linter,parser,codegen,minifier expected, 2 skipped (carried "
        "from the baseline run)",
    ]
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    assert json.loads(written["matrix"]) == {"include": [{"shard": "linter"}, {"shard": "parser"}]}
    assert (written["shards"], written["skip"], written["expect"]) == (
        "linter,parser",
        "codegen,minifier",
        "linter,parser,codegen,minifier",
    )
    opened = _report(stack, project, pr_run)
    assert {s["name"]: s["state"] for s in opened["shards"]} == {
        "linter": "expected",
        "parser": "expected",
        "codegen": "skipped",
        "minifier": "skipped",
    }

    for matrix in json.loads(written["matrix"])["include"]:  # each matrix job pushes its shard
        shard = matrix["shard"]
        pushed = subprocess.run(
            [
                sys.executable,
                "-m",
                "codspeed_client.cli",
                "push",
                "--shard",
                shard,
                "--expect",
                written["expect"],
                "--profile-folder",
                str(folders[shard]),
            ],
            env={**env, "GITHUB_JOB": "bench"},
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    final = _final(stack, project, pr_run)
    assert final["state"] == "forwarded" and final["commit"] == head
    assert {s["name"]: s["state"] for s in final["shards"]} == {
        "linter": "arrived",
        "parser": "arrived",
        "codegen": "carried",
        "minifier": "carried",
    }


@pytest.mark.slow
def test_an_empty_plan_opens_a_run_of_every_shard_carried_and_forwards_it_at_once_under_its_own_ci_run(
    stack, project, tmp_path
):
    main_run, pr_run = f"plan-main-{os.getpid()}-e", f"plan-pr-{os.getpid()}-e"
    _main_ran_every_shard(stack, project, main_run, tmp_path)

    repo, fork_point, head = _repository(tmp_path)
    changed = tmp_path / "changed.txt"
    changed.write_text("docs/guide.md\n")  # under no shard's paths: nothing to run
    env = pull_request_env(stack, tmp_path, project, pr_run, repo, head, fork_point, number=9, job="plan")
    planned = subprocess.run(
        [sys.executable, "-m", "codspeed_client.cli", "plan", "--open", "--changed", str(changed)],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert planned.stdout.splitlines()[-1] == (
        f"run {pr_run} ({project}): open: opened: shards linter,parser,codegen,minifier expected, all 4 skipped: "
        "forwarded now, each carried from the latest run of main that has it"
    )

    final = _final(stack, project, pr_run)  # no push, no close
    assert final["state"] == "forwarded" and final["arrived"] == 0 and final["commit"] == head, final
    assert {s["name"]: s["state"] for s in final["shards"]} == dict.fromkeys(SHARDS, "carried")
    [upload] = stack.upstream.uploads(pr_run)
    meta = json.loads((upload / "metadata.json").read_text())
    assert (meta["commitHash"], meta["ref"], meta["runPart"]["runId"], meta["ghData"]) == (
        head,
        "refs/pull/9/merge",
        pr_run,
        {"runId": pr_run, "job": "plan"},
    )  # this CI run's, not main's
    assert meta["runPart"]["metadata"]["carriedShards"] == {
        name: {"runId": main_run, "commitHash": "1" * 40} for name in SHARDS
    }
    assert benchmarks_in(archive_of(upload)) == benchmarks_in(archive_of(stack.upstream.uploads(main_run)[0]))


def test_on_the_merge_commit_actions_checkout_makes_the_plan_is_the_pull_requests_own_change(stack, project, tmp_path):
    """actions/checkout checks a pull request out as GitHub's merge commit (refs/pull/N/merge): its
    first parent is main as merged into, which moved on after the branch left it and after the
    event's base.sha. The plan diffed the merge base with the merge commit, so it ran the shards of
    what main gained too (parser, codegen): now it runs what the pull request changes (linter)."""
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]

    def commit(path: str, message: str) -> str:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(message + "\n")
        subprocess.run([*git, "add", "."], check=True)
        return git_commit(repo, message)

    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    commit(".codspeed/shards.toml", CONFIG)
    subprocess.run([*git, "checkout", "-q", "-b", "feature"], check=True)
    head = commit("crates/oxc_linter/src/lib.rs", "the pull request's change")
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    base_sha = commit("crates/oxc_parser/src/lexer.rs", "main after the branch left it")  # the event's base.sha
    commit("crates/oxc_codegen/src/lib.rs", "main after the event")  # what the merge ref was made on
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", "Merge feature into main", "feature"], check=True)

    env = pull_request_env(
        stack, tmp_path, project, f"merge-{os.getpid()}", repo, head, base_sha, number=11, job="plan"
    )
    for checkout in ("HEAD", head):  # the merge commit (the default), then the head itself (ref: head.sha)
        subprocess.run([*git, "checkout", "-q", checkout], check=True)
        planned = subprocess.run(
            [sys.executable, "-m", "codspeed_client.cli", "plan"],
            env=env,
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert planned.returncode == 0, planned.stderr
        assert [line for line in planned.stdout.splitlines() if line.startswith("runs ")] == [
            "runs linter: crates/oxc_linter/src/lib.rs changed"
        ], (checkout, planned.stdout)
