import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codspeed_client import errors
from codspeed_client.ci_providers import detect
from codspeed_client.cli import main
from codspeed_client.commands.push import parse_shard as _parse_shard
from codspeed_client.errors import ClientError
from tests.factories import git_commit

GITHUB_PR = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_REPOSITORY": "acme/widgets",
    "GITHUB_RUN_ID": "7044765741",
    "GITHUB_SHA": "1" * 40,
    "GITHUB_REF": "refs/pull/42/merge",
    "GITHUB_HEAD_REF": "feature",
    "GITHUB_BASE_REF": "main",
    "GITHUB_EVENT_NAME": "pull_request",
    "GITHUB_JOB": "bench",
    "GITHUB_ACTOR": "octocat",
    "GITHUB_WORKSPACE": "/w",
}


@pytest.fixture(autouse=True)
def outside_any_checkout(tmp_path, monkeypatch):
    """The client reads the job's commit from the checkout it runs in, as the runner does: these tests
    run where there is none (never this repository's own), unless they make one."""
    away = tmp_path / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)


def test_shard_forms():
    assert _parse_shard("2/4", None) == ("2", 4, None)
    assert _parse_shard("lint", "parse,lint") == ("lint", None, ["parse", "lint"])
    for shard, expect, message in (
        ("5/4", None, "1 <= I <= N"),
        ("0/4", None, "1 <= I <= N"),
        ("1/0", None, "1 <= I <= N"),
        ("x", "a,b", "not among --expect"),
        ("1/2", "a,b", "drop --expect"),
        ("3", None, "write --shard 3/N"),
        ("solo", None, "write --expect solo,other"),
        ("1/3/5", None, "neither I/N"),
        ("", None, "neither I/N"),
        ("a", "a,a", "names a shard twice"),
        ("a b", "a b,c", "is not usable"),
    ):
        with pytest.raises(ClientError, match=message) as caught:
            _parse_shard(shard, expect)
        assert caught.value.exit_code == errors.USAGE


def test_github_pull_request_detection_sends_the_merge_commit_and_shows_the_head(tmp_path):
    """Without a checkout, GITHUB_SHA (the merge commit, as the checkout's HEAD would be); the head is
    what people are shown."""
    event = tmp_path / "event.json"
    repo = {"id": 1, "full_name": "acme/widgets", "owner": {"login": "acme"}}
    event.write_text(json.dumps({"pull_request": {"head": {"sha": "2" * 40, "ref": "feature", "repo": repo}}}))
    ctx = detect({**GITHUB_PR, "GITHUB_EVENT_PATH": str(event)})
    assert (ctx.provider, ctx.project, ctx.run_id, ctx.commit, ctx.head_commit) == (
        "GITHUB_ACTIONS",
        "acme/widgets",
        "7044765741",
        "1" * 40,
        "2" * 40,
    )
    assert (ctx.ref, ctx.head_ref, ctx.base_ref) == ("refs/pull/42/merge", "feature", "main")
    assert ctx.extra == {"ghData": {"runId": "7044765741", "job": "bench"}}


@pytest.mark.parametrize("written", [None, "{not json"], ids=["missing", "not JSON"])
def test_an_event_file_that_cannot_be_read_is_said_not_silently_dropped(tmp_path, capsys, written):
    """The base, the fork and the head commit were lost without a word."""
    event = tmp_path / "event.json"
    if written is not None:
        event.write_text(written)
    ctx = detect({**GITHUB_PR, "GITHUB_EVENT_PATH": str(event)})
    said = capsys.readouterr()
    assert ctx.commit == GITHUB_PR["GITHUB_SHA"] and ctx.fork is None and said.out == ""
    assert said.err.startswith(f"::warning title=codspeed-client::GITHUB_EVENT_PATH {event} cannot be read (")
    assert "the pull request's head, base and fork are not known" in said.err


def test_gitlab_and_buildkite_detection():
    gitlab = detect(
        {
            "GITLAB_CI": "true",
            "CI_PROJECT_PATH": "platform/perf/widgets",
            "CI_PIPELINE_ID": "88",
            "CI_COMMIT_SHA": "3" * 40,
            "CI_COMMIT_REF_NAME": "feature",
            "CI_JOB_NAME": "bench 1/2",
            "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "CI_PIPELINE_SOURCE": "merge_request_event",
            "CI_MERGE_REQUEST_IID": "3",
            "CI_NODE_INDEX": "1",
            "CI_NODE_TOTAL": "2",
        }
    )
    assert (gitlab.provider, gitlab.project, gitlab.run_id, gitlab.commit) == (
        "GITLAB_CI",
        "platform/perf/widgets",
        "88",
        "3" * 40,
    )
    assert (gitlab.ref, gitlab.head_ref, gitlab.base_ref, gitlab.shard) == (
        "refs/pull/3/merge",
        "feature",
        "main",
        "1/2",
    )
    buildkite = detect(
        {
            "BUILDKITE": "true",
            "BUILDKITE_REPO": "git@github.com:acme/widgets.git",
            "BUILDKITE_BUILD_ID": "b-1",
            "BUILDKITE_COMMIT": "4" * 40,
            "BUILDKITE_BRANCH": "main",
            "BUILDKITE_PARALLEL_JOB": "0",
            "BUILDKITE_PARALLEL_JOB_COUNT": "3",
            "BUILDKITE_PULL_REQUEST": "false",
        }
    )
    assert (buildkite.project, buildkite.run_id, buildkite.ref, buildkite.shard) == (
        "acme/widgets",
        "b-1",
        "refs/heads/main",
        "1/3",
    )
    pull = detect(
        {
            "BUILDKITE": "true",
            "BUILDKITE_REPO": "https://gitlab.com/group/sub/app.git",
            "BUILDKITE_BRANCH": "fix",
            "BUILDKITE_PULL_REQUEST": "17",
            "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
        }
    )
    assert (pull.project, pull.event, pull.ref, pull.head_ref, pull.base_ref) == (
        "group/sub/app",
        "pull_request",
        "refs/pull/17/merge",
        "fix",
        "main",
    )


CIRCLECI = {
    "CIRCLECI": "true",
    "CI": "true",
    "CIRCLE_PROJECT_USERNAME": "acme",
    "CIRCLE_PROJECT_REPONAME": "widgets",
    "CIRCLE_WORKFLOW_ID": "6e1f3c2a-0b4d-4f5e-9a8b-7c6d5e4f3a2b",
    "CIRCLE_SHA1": "5" * 40,
    "CIRCLE_BRANCH": "fix",
    "CIRCLE_JOB": "bench",
    "CIRCLE_NODE_INDEX": "2",
    "CIRCLE_NODE_TOTAL": "3",
    "CIRCLE_USERNAME": "octocat",
    "CIRCLE_WORKING_DIRECTORY": "/home/circleci/project",
    "CIRCLE_BUILD_URL": "https://app.circleci.com/pipelines/github/acme/widgets/12/workflows/w/jobs/34",
}


def test_circleci_detection_names_the_workflow_its_node_and_the_pull_request():
    push = detect(CIRCLECI)
    assert (push.provider, push.project, push.run_id, push.commit, push.job) == (
        "CIRCLECI",
        "acme/widgets",
        CIRCLECI["CIRCLE_WORKFLOW_ID"],
        "5" * 40,
        "bench",
    )
    assert (push.ref, push.event, push.shard, push.fork, push.ci_url) == (
        "refs/heads/fix",
        "push",
        "3/3",
        None,
        CIRCLECI["CIRCLE_BUILD_URL"],
    )
    pull = detect({**CIRCLECI, "CIRCLE_PULL_REQUEST": "https://github.com/acme/widgets/pull/17"})
    assert (pull.ref, pull.head_ref, pull.event) == ("refs/pull/17/merge", "fix", "pull_request")
    fork = detect(  # a fork's pull request: CIRCLE_PR_NUMBER alone names it
        {**CIRCLECI, "CIRCLE_PR_NUMBER": "18", "CIRCLE_PR_USERNAME": "someone", "CIRCLE_PR_REPONAME": "widgets"}
    )
    assert (fork.fork, fork.ref, fork.event) == ("someone/widgets", "refs/pull/18/merge", "pull_request")
    assert detect({**CIRCLECI, "CIRCLE_TAG": "v1", "CIRCLE_BRANCH": ""}).ref == "refs/tags/v1"


def test_a_circleci_push_states_metadata_version_11_as_the_runner_after_5_0_2_does():
    from codspeed_client import metadata

    sent = metadata.build(detect(CIRCLECI), project="acme/widgets", run_id="w", commit="5" * 40, shard="3/3")
    assert (sent["version"], sent["runEnvironment"], sent["repositoryProvider"]) == (11, "CIRCLECI", "GITHUB")
    assert "ghData" not in sent and "glData" not in sent


def test_a_remote_that_is_a_local_path_is_not_a_project():
    from codspeed_client.git import project_of_remote

    assert project_of_remote("/srv/git/widgets.git") is None and project_of_remote("../widgets") is None
    assert project_of_remote("file:///srv/git/widgets.git") is None
    assert project_of_remote("git@github.com:acme/widgets.git") == "acme/widgets"
    assert project_of_remote("https://github.com/acme/widgets") == "acme/widgets"


def test_missing_configuration_is_one_sentence_and_exit_3(capsys, monkeypatch):
    monkeypatch.delenv("CODSPEED_AGGREGATOR_URL", raising=False)
    assert main(["status", "--project", "a/b", "--run-id", "1"]) == errors.CONFIG
    assert (
        capsys.readouterr().err.strip()
        == "codspeed-client: error: no aggregator URL: pass --api-url or set CODSPEED_AGGREGATOR_URL"
    )


def test_a_missing_profile_folder_is_exit_7(tmp_path, capsys):
    code = main(
        [
            "push",
            "--shard",
            "1/2",
            "--profile-folder",
            str(tmp_path / "nope"),
            "--api-url",
            "http://127.0.0.1:9",
            "--token",
            "t",
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
        ]
    )
    assert code == errors.INPUT
    assert "does not exist" in capsys.readouterr().err


def test_a_folder_without_profiles_is_exit_7(tmp_path, capsys):
    (tmp_path / "runner.log").write_text("log")
    code = main(
        [
            "push",
            "--shard",
            "1/2",
            "--profile-folder",
            str(tmp_path),
            "--api-url",
            "http://127.0.0.1:9",
            "--token",
            "t",
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
        ]
    )
    assert code == errors.INPUT
    assert "holds no <pid>.out file" in capsys.readouterr().err


def test_an_unreachable_aggregator_is_exit_6(capsys, monkeypatch):
    monkeypatch.setenv("CODSPEED_RETRIES", "1")
    code = main(["status", "--api-url", "http://127.0.0.1:9", "--token", "t", "--project", "a/b", "--run-id", "1"])
    assert code == errors.NETWORK
    assert "cannot reach the aggregator at http://127.0.0.1:9" in capsys.readouterr().err


def test_the_client_imports_neither_boto3_nor_powertools():
    probe = (
        "import sys, codspeed_client.cli, codspeed_client.api, codspeed_client.bundle, codspeed_client.metadata, "
        "codspeed_client.report;"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'boto3', 'botocore', 'aws_lambda_powertools', 'codspeed_aggregator'}))"
    )
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_help_does_not_import_requests_or_pydantic():
    probe = (
        "import sys; from codspeed_client.cli import parser; parser().format_help();"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'requests', 'pydantic', 'urllib3'}))"
    )
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_github_fork_pull_request_rerun_and_matrix_keep_the_base_project_and_the_run(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "head": {
                        "sha": "9" * 40,
                        "ref": "patch-1",
                        "repo": {"id": 2, "full_name": "someone/widgets", "owner": {"login": "someone"}},
                    },
                    "base": {"repo": {"id": 1, "full_name": "acme/widgets", "owner": {"login": "acme"}}},
                }
            }
        )
    )
    env = {
        **GITHUB_PR,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_RUN_ATTEMPT": "3",
        "GITHUB_HEAD_REF": "someone:patch-1",
    }
    ctx = detect(env)
    assert ctx.project == "acme/widgets"  # the base repository, where the benchmarks belong
    assert ctx.run_id == "7044765741"  # a re-run attempt is the same run: its shards replace the earlier ones
    # the runner's words: the merge commit (GITHUB_SHA without a checkout), the fork's branch as owner:branch
    assert (ctx.commit, ctx.head_commit, ctx.head_ref) == ("1" * 40, "9" * 40, "someone:patch-1")


def _fork_event(tmp_path, head: dict | None) -> str:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "head": {"sha": "9" * 40, **({"repo": head} if head else {"repo": None})},
                    "base": {"sha": "1" * 40, "repo": {"full_name": "acme/widgets"}},
                }
            }
        )
    )
    return str(event)


def test_a_pull_request_from_a_fork_is_told_from_one_of_the_projects_own_branches(tmp_path):
    assert (
        detect({**GITHUB_PR, "GITHUB_EVENT_PATH": _fork_event(tmp_path, {"full_name": "someone/widgets"})}).fork
        == "someone/widgets"
    )
    assert detect({**GITHUB_PR, "GITHUB_EVENT_PATH": _fork_event(tmp_path, None)}).fork == "a deleted fork"
    assert detect({**GITHUB_PR, "GITHUB_EVENT_PATH": _fork_event(tmp_path, {"full_name": "acme/widgets"})}).fork is None
    assert detect({**GITHUB_PR, "GITHUB_EVENT_NAME": "push"}).fork is None


@pytest.mark.parametrize("status", [401, 403])
def test_a_forks_pull_request_without_a_token_sends_its_requests_without_one(tmp_path, capsys, monkeypatch, status):
    """GitHub gives a fork's jobs no secrets: the client asks anyway, with no Authorization header. A
    project that takes no such request (401) leaves the contributor's job green with one warning; a
    claim the aggregator refused (403: GitHub does not bear it out) fails it, saying why."""
    from tests.fake_github import JsonHandler, Loopback

    seen, said = (
        [],
        {
            401: "missing Authorization header: send the aggregator's token: a request without one is taken "
            "for the projects in TokenlessProjects",
            403: "request without a token refused: pull request acme/widgets#42 is closed",
        },
    )

    class Aggregator(JsonHandler):
        def do_POST(self) -> None:
            seen.append((self.path, self.headers.get("authorization"), self._body()))
            self._answer(status, {"error": said[status]})

    server = Loopback()
    server.serve(Aggregator)
    try:
        for name, value in {
            **GITHUB_PR,
            "GITHUB_EVENT_PATH": _fork_event(tmp_path, {"full_name": "someone/widgets"}),
            "CODSPEED_AGGREGATOR_URL": server.url,
            "CODSPEED_AGGREGATOR_TOKEN": "",
        }.items():
            monkeypatch.setenv(name, value)
        code = main(["close"])
    finally:
        server.stop()
    closed = {"project": "acme/widgets", "run_id": "7044765741", "skip": [], "ci_run": "7044765741"}
    assert seen == [("/v1/runs/close", None, closed)]  # its CI run: the close says its jobs ended
    out, err = capsys.readouterr()
    if status == 401:
        assert code == errors.OK and err == ""
        assert out == (
            "::warning title=codspeed-client close skipped::this pull request comes from a fork, whose jobs "
            "GitHub gives no secrets, and the aggregator takes no request without a token for this project, "
            f"so nothing was sent: {said[401]}\n"
        )
    else:
        assert code == errors.AUTH
        assert err == f"codspeed-client: error: the aggregator refused a request without a token (403): {said[403]}\n"


def test_a_merge_request_from_a_fork_on_gitlab_without_a_token_warns_once_and_exits_0(capsys, monkeypatch):
    """Only GitHub's pull requests can be checked without a token: a GitLab fork's sends nothing, as before."""
    for name, value in {
        "GITLAB_CI": "true",
        "CI_PROJECT_PATH": "acme/widgets",
        "CI_PIPELINE_ID": "77",
        "CI_COMMIT_SHA": "1" * 40,
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_IID": "5",
        "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": "someone/widgets",
        "CI_COMMIT_REF_NAME": "patch",
        "CODSPEED_AGGREGATOR_URL": "http://127.0.0.1:9",
        "CODSPEED_AGGREGATOR_TOKEN": "",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["close"]) == errors.OK
    out, err = capsys.readouterr()
    assert out == (
        "::warning title=codspeed-client close skipped::this merge request comes from a fork "
        "(someone/widgets), whose jobs get no secrets: with no aggregator token nothing was sent (a GitHub "
        "Actions pull request from a fork is sent without one, and checked with GitHub)\n"
    )
    assert err == ""


def test_a_pull_request_of_the_projects_own_branch_without_a_token_is_still_exit_3(tmp_path, capsys, monkeypatch):
    for name, value in {
        **GITHUB_PR,
        "GITHUB_EVENT_PATH": _fork_event(tmp_path, {"full_name": "acme/widgets"}),
        "CODSPEED_AGGREGATOR_URL": "http://127.0.0.1:9",
        "CODSPEED_AGGREGATOR_TOKEN": "",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["close"]) == errors.CONFIG
    assert "no token" in capsys.readouterr().err


def test_plain_git_is_detected_locally(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", "-b", "feature", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:acme/widgets.git"], check=True
    )
    monkeypatch.chdir(tmp_path)
    ctx = detect({})
    # the runner's local provider: the ref is the HEAD commit, the branch its head ref, the event "local"
    assert (ctx.provider, ctx.project, ctx.ref, ctx.head_ref, ctx.event) == (
        "LOCAL",
        "acme/widgets",
        ctx.commit,
        "feature",
        "local",
    )
    assert ctx.commit and len(ctx.commit) == 40 and ctx.repository_root == f"{tmp_path.resolve()}/"
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "--detach"], check=True)
    detached = detect({})
    assert (detached.commit, detached.ref, detached.head_ref) == (ctx.commit, ctx.commit, None)


class _FakeApi:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def report(self, project, run_id, missing_ok=False):
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_status_wait_waits_exactly_its_timeout_and_polls_at_the_end():
    from codspeed_client.report import wait_for_final

    clock = _Clock()
    api = _FakeApi([{"state": "open"}])
    report, timed_out = wait_for_final(lambda: api.report("a/b", "1"), 12, 5, sleep=clock.sleep, clock=clock)
    assert timed_out and clock.now == 12 and api.calls == 4  # at 0, 5, 10 and 12 seconds


def test_status_wait_waits_for_a_run_that_does_not_exist_yet():
    from codspeed_client.report import wait_for_final

    clock = _Clock()
    api = _FakeApi([None, None, {"state": "open"}, {"state": "forwarded", "shards": []}])
    report, timed_out = wait_for_final(lambda: api.report("a/b", "1"), 60, 1, sleep=clock.sleep, clock=clock)
    assert not timed_out and report["state"] == "forwarded" and clock.now == 3


def test_the_metadata_describes_the_machine_with_the_runners_fields(tmp_path, monkeypatch):
    from codspeed_client import system

    (tmp_path / "etc").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\n')
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: sse4_2 "
        "avx2 bmi2\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: sse4_2 "
        "avx2 bmi2\n"
    )
    (tmp_path / "proc/meminfo").write_text("MemTotal:       16375000 kB\nMemFree:         1000 kB\n")
    monkeypatch.setattr(system.platform, "system", lambda: "Linux")
    monkeypatch.setenv("USER", "runner")  # what the environment says: the runner runs whoami, as the client reads it
    found = system.machine(str(tmp_path))
    assert {
        k: found[k]
        for k in ("os", "osVersion", "user", "cpuBrand", "cpuName", "cpuVendorId", "totalMemoryGb", "cpuFlags")
    } == {
        "os": "ubuntu",
        "osVersion": "24.04",
        "user": subprocess.run(["whoami"], capture_output=True, text=True, check=True).stdout.strip(),
        "cpuBrand": "AMD EPYC 7763 64-Core Processor",
        "cpuName": "cpu0",
        "cpuVendorId": "AuthenticAMD",
        "totalMemoryGb": 16,
        "cpuFlags": ["avx2", "bmi2", "sse4_2"],
    }
    assert isinstance(found["cpuCores"], int) and found["arch"] and found["host"]
    for other, name in (
        ("Darwin", "macos"),
        ("Windows", "windows"),
    ):  # no /proc there: what the platform says, no crash
        monkeypatch.setattr(system.platform, "system", lambda other=other: other)
        answer = system.machine(str(tmp_path / "nowhere"))
        assert answer["os"] == name and answer["cpuFlags"] == [] and "totalMemoryGb" not in answer
    monkeypatch.delenv("USER")  # a container job: no USER, still whoami's account
    assert system.machine(str(tmp_path))["user"] == found["user"]
    monkeypatch.setattr(system.os, "getuid", lambda: 54321)  # a uid with no account: its number
    assert system.machine(str(tmp_path))["user"] == "54321"


def test_pushed_metadata_has_every_field_the_runner_sends():
    from codspeed_client.ci import CiContext
    from codspeed_client.metadata import build
    from tests import runner

    built = build(
        CiContext(provider="GITHUB_ACTIONS", ref="refs/heads/main"),
        project="acme/app",
        run_id="1",
        commit="a" * 40,
        shard="1",
    )
    expected = runner.metadata(b"", executor="valgrind", owner="acme", repository="app", commit="a" * 40, run_part=None)
    assert set(expected) - {"profileMd5"} <= set(built)
    assert set(runner.MACHINE) - {"user"} <= set(built["runner"])


@pytest.mark.parametrize(
    "env, event",
    [
        ({"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "merge_group"}, "merge_group"),
        ({"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request_target"}, "pull_request_target"),
        ({"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "release"}, "release"),
        ({"GITLAB_CI": "true", "CI_PIPELINE_SOURCE": "parent_pipeline"}, "parent_pipeline"),
        ({"GITLAB_CI": "true", "CI_PIPELINE_SOURCE": "external_pull_request_event"}, "external_pull_request_event"),
    ],
)
def test_an_event_the_runner_never_runs_under_is_refused_in_its_words(env, event):
    """The runner: "Event X is not supported by CodSpeed" (RunEvent: push, pull_request,
    workflow_dispatch, schedule, local); upstream received ``event merge_group`` from the client."""
    from codspeed_client.errors import CONFIG, ClientError
    from codspeed_client.metadata import build

    ctx = detect({**env, "GITHUB_REPOSITORY": "acme/app", "CI_PROJECT_PATH": "acme/app"})
    with pytest.raises(ClientError, match=f"^Event {event} is not supported by CodSpeed") as refused:
        build(ctx, project="acme/app", run_id="1", commit="a" * 40, shard="1")
    assert refused.value.exit_code == CONFIG


def test_a_merged_results_pipeline_sends_gitlabs_merge_commit_and_shows_the_source_branch_head():
    """The runner sends HEAD of CI_PROJECT_DIR (CI_COMMIT_SHA, GitLab's merge commit in a merged results
    pipeline); people are shown the source branch's head."""
    merged = detect(
        {
            "GITLAB_CI": "true",
            "CI_PROJECT_PATH": "acme/widgets",
            "CI_PIPELINE_ID": "90",
            "CI_COMMIT_SHA": "9" * 40,
            "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": "5" * 40,
        }
    )
    assert (merged.commit, merged.head_commit) == ("9" * 40, "5" * 40)
    detached = detect(
        {
            "GITLAB_CI": "true",
            "CI_PROJECT_PATH": "acme/widgets",
            "CI_PIPELINE_ID": "91",
            "CI_COMMIT_SHA": "6" * 40,
            "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": "",
        }
    )  # empty in MR pipelines
    assert (detached.commit, detached.head_commit) == ("6" * 40, None)


def test_a_buildkite_build_names_the_checkouts_head_and_without_one_its_commit(tmp_path, monkeypatch):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    head = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.chdir(tmp_path)
    env = {"BUILDKITE": "true", "BUILDKITE_REPO": "git@github.com:acme/widgets.git", "BUILDKITE_BUILD_ID": "b-2"}
    assert detect({**env, "BUILDKITE_COMMIT": "HEAD"}).commit == head
    assert detect({**env, "BUILDKITE_COMMIT": "4" * 40}).commit == head  # the runner's: the checkout's HEAD
    monkeypatch.chdir(tmp_path.parent)  # no checkout here: the CI's commit, a SHA taken as it is
    assert detect({**env, "BUILDKITE_COMMIT": "4" * 40}).commit == "4" * 40
    assert detect({**env, "BUILDKITE_COMMIT": "HEAD"}).commit is None  # git cannot tell: the client says --commit


def test_each_ci_names_its_run_page_for_the_report_to_link():
    github = detect(
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": "acme/widgets",
            "GITHUB_RUN_ID": "7",
            "GITHUB_SERVER_URL": "https://ghe.example.com",
        }
    )
    assert github.ci_url == "https://ghe.example.com/acme/widgets/actions/runs/7"
    gitlab = detect(
        {
            "GITLAB_CI": "true",
            "CI_PROJECT_PATH": "g/s/app",
            "CI_PIPELINE_URL": "https://gitlab.example.com/g/s/app/-/pipelines/88",
        }
    )
    assert gitlab.ci_url == "https://gitlab.example.com/g/s/app/-/pipelines/88"
    buildkite = detect({"BUILDKITE": "true", "BUILDKITE_BUILD_URL": "https://buildkite.com/acme/widgets/builds/12"})
    assert buildkite.ci_url == "https://buildkite.com/acme/widgets/builds/12"


def test_a_pull_requests_base_commit_is_its_merge_base_when_the_clone_has_the_history(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    fork_point = git_commit(repo, "a")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "feature"], check=True)
    head = git_commit(repo, "f")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    tip = git_commit(repo, "c")  # main moved on after the branch left it
    event = tmp_path / "event.json"  # GitHub's pull_request payload: base.sha is the base branch's tip
    event.write_text(json.dumps({"pull_request": {"head": {"sha": head}, "base": {"sha": tip}}}))
    found = detect({**GITHUB_PR, "GITHUB_EVENT_PATH": str(event), "GITHUB_WORKSPACE": str(repo)})
    assert (found.commit, found.head_commit, found.base_commit) == (tip, head, fork_point)
    shallow = tmp_path / "shallow"  # actions/checkout's depth-1 clone: neither commit is there
    subprocess.run(["git", "init", "-q", str(shallow)], check=True)
    assert detect({**GITHUB_PR, "GITHUB_EVENT_PATH": str(event), "GITHUB_WORKSPACE": str(shallow)}).base_commit == tip


def test_a_base_commits_ancestors_are_its_first_parents_the_nearest_first_as_far_as_the_clone_holds_them(tmp_path):
    from codspeed_client.git import ancestors

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    first, second = git_commit(repo, "a"), git_commit(repo, "b")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "side"], check=True)
    side = git_commit(repo, "on a side branch")
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "main"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.email=ci@example.com",
            "-c",
            "user.name=ci",
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "merged",
            "side",
        ],
        check=True,
    )
    merged = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    base = git_commit(repo, "the base")
    assert ancestors(str(repo), base, 50) == [merged, second, first]  # the side branch's commit is no first parent
    assert ancestors(str(repo), base, 2) == [merged, second] and side not in ancestors(str(repo), merged, 50)
    assert ancestors(str(repo), first, 50) == []
    shallow = tmp_path / "shallow"  # actions/checkout's depth-1 clone holds none
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    assert ancestors(str(shallow), base, 50) == [] and ancestors(str(tmp_path / "nowhere"), base, 50) == []


def test_a_merge_requests_base_commit_is_its_diffs_merge_base():
    gitlab = {"GITLAB_CI": "true", "CI_PROJECT_PATH": "acme/widgets", "CI_MERGE_REQUEST_DIFF_BASE_SHA": "7" * 40}
    assert detect(gitlab).base_commit == "7" * 40
    assert detect({**gitlab, "CI_MERGE_REQUEST_TARGET_BRANCH_SHA": "8" * 40}).base_commit == "7" * 40  # merged results
    assert (
        detect(
            {"GITLAB_CI": "true", "CI_PROJECT_PATH": "acme/widgets", "CI_MERGE_REQUEST_TARGET_BRANCH_SHA": "8" * 40}
        ).base_commit
        == "8" * 40
    )  # only the target's tip given
    assert detect({"GITLAB_CI": "true", "CI_PROJECT_PATH": "acme/widgets"}).base_commit is None  # a branch pipeline


RUNNER_GITLAB_JOB = {  # the CodSpeed runner's own GitLab test environment (its gitlab_ci provider's tests)
    "GITLAB_CI": "true",
    "CI_PROJECT_DIR": "/builds/owner/repository",
    "GITLAB_USER_ID": "19605940",
    "GITLAB_USER_LOGIN": "actor",
    "CI_PROJECT_NAME": "repository",
    "CI_PROJECT_NAMESPACE": "owner",
    "CI_PROJECT_PATH": "owner/repository",
    "CI_JOB_NAME": "build-job",
    "CI_JOB_ID": "6957110437",
    "CI_PIPELINE_ID": "1200",
    "CI_COMMIT_SHA": "3" * 40,
}
RUNNER_MERGE_REQUEST = {
    **RUNNER_GITLAB_JOB,
    "CI_PIPELINE_SOURCE": "merge_request_event",
    "CI_COMMIT_REF_NAME": "main",
    "CI_MERGE_REQUEST_IID": "5",
    "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feat/awesome-feature",
    "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": "owner/repository",
}


@pytest.mark.parametrize(
    "env, expected",
    [
        (
            RUNNER_MERGE_REQUEST,
            {"ref": "refs/pull/5/merge", "headRef": "feat/awesome-feature", "baseRef": "main", "event": "pull_request"},
        ),
        (
            {**RUNNER_MERGE_REQUEST, "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": "fork-owner/repository"},
            {
                "ref": "refs/pull/5/merge",
                "headRef": "fork-owner:feat/awesome-feature",
                "baseRef": "main",
                "event": "pull_request",
            },
        ),
        (
            {**RUNNER_GITLAB_JOB, "CI_PIPELINE_SOURCE": "push", "CI_COMMIT_REF_NAME": "main"},
            {"ref": "refs/heads/main", "headRef": None, "baseRef": "main", "event": "push"},
        ),
        (
            {
                **RUNNER_GITLAB_JOB,
                "CI_PIPELINE_SOURCE": "schedule",
                "CI_COMMIT_REF_NAME": "main",
                "CI_COMMIT_TAG": "v1",
            },
            {"ref": "refs/tags/v1", "headRef": None, "baseRef": "main", "event": "schedule"},
        ),
        (
            {**RUNNER_GITLAB_JOB, "CI_PIPELINE_SOURCE": "web", "CI_COMMIT_REF_NAME": "main"},
            {"ref": "refs/heads/main", "headRef": None, "baseRef": "main", "event": "workflow_dispatch"},
        ),
    ],
)
def test_gitlab_metadata_is_what_codspeeds_runner_sends_in_the_same_job(env, expected):
    from codspeed_client import metadata

    ctx = detect(env)
    sent = metadata.build(ctx, project=ctx.project, run_id=ctx.run_id, commit=ctx.commit, shard="1")
    common = {
        "owner": "owner",
        "repository": "repository",
        "sender": {"id": "19605940", "login": "actor"},
        "ghData": None,
        "glData": {"runId": "6957110437", "job": "build-job"},
        "repositoryRootPath": "/builds/owner/repository",
    }
    assert {k: sent[k] for k in (*expected, *common)} == {**expected, **common}
    assert ctx.run_id == "1200"  # the run is the pipeline, its jobs its shards
    assert (
        ctx.fork == ("fork-owner/repository" if expected["headRef"].startswith("fork-owner:") else None)
        if expected["headRef"]
        else ctx.fork is None
    )


@pytest.mark.parametrize("recorded", ["valgrind-shard-1.tar.gz", "walltime-shard-1.tar"])
def test_a_pushed_folder_is_packed_with_the_runners_members_in_its_order_folders_included(tmp_path, recorded):
    """The client's tar had the files but not ``.`` and ``./results``, which the runner's tar of the
    same folder (tests/fixtures/pytest_codspeed, packed as the runner packs) holds."""
    import tarfile

    from codspeed_client.bundle import from_folder

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "pytest_codspeed" / recorded
    with tarfile.open(fixture) as source:
        runners = [(m.name, m.type) for m in source.getmembers()]
        source.extractall(tmp_path / "folder", filter="data")
    (tmp_path / "folder" / "results" / "empty").mkdir()  # a folder with nothing in it is still a member
    bundle = from_folder(tmp_path / "folder")
    with tarfile.open(bundle.path) as packed:
        ours = [(m.name, m.type) for m in packed.getmembers()]
    bundle.path.unlink()
    expected = sorted(runners[1:] + [("./results/empty", tarfile.DIRTYPE)], key=lambda m: Path(m[0]).parts)
    assert ours == runners[:1] + expected and ours[0] == (".", tarfile.DIRTYPE)


def test_a_profile_folder_given_as_a_link_is_followed_and_links_inside_it_stay_refused(tmp_path):
    """The runner's tar follows the path it is given; the client's root entry was the link itself,
    refused (``member '' is a symlink``, exit 7)."""
    import tarfile

    from codspeed_client.bundle import from_folder
    from codspeed_client.errors import ClientError as Refusal
    from codspeed_rules.bundle import validate_bundle
    from codspeed_rules.tar import BadBundle
    from tests.factories import profile_members

    real = tmp_path / "real"
    real.mkdir()
    for name, data in profile_members(4242, ["a::one"]).items():
        (real / name).parent.mkdir(parents=True, exist_ok=True)
        (real / name).write_bytes(data)
    (tmp_path / "profiles").symlink_to(real, target_is_directory=True)
    bundle = from_folder(tmp_path / "profiles")
    with tarfile.open(bundle.path) as packed:
        members = packed.getmembers()
    assert members[0].name == "." and members[0].isdir() and all(not m.issym() for m in members)
    bundle.path.unlink()
    (real / "elsewhere.out").symlink_to("/etc/hostname")  # a link inside: still refused
    inside = from_folder(tmp_path / "profiles")
    with pytest.raises((BadBundle, Refusal), match="symlink"):
        with open(inside.path, "rb") as raw:
            validate_bundle(raw, "valgrind")
    inside.path.unlink()


def test_a_final_report_naming_overlaps_is_exit_14_unless_allowed_and_its_text_names_them():
    from codspeed_client.report import final_exit_code, render_text

    overlap = {"benchmark": "a::one", "executor": "valgrind", "shards": ["1", "2"], "in_shards": 2}
    report = {"state": "forwarded", "partial": False, "run_id": "r", "project": "o/p", "arrived": 2, "expected": 2}
    report |= {"shards": [{"name": n, "state": "arrived", "attempt": 1} for n in "12"]}
    assert final_exit_code(report, timed_out=False) == 0
    report |= {"overlaps": [overlap], "overlaps_total": 1}
    assert final_exit_code(report, timed_out=False) == 14
    assert final_exit_code(report, timed_out=False, allow_overlaps=True) == 0
    assert "measured in more than one shard (1): a::one (valgrind) in 1, 2" in render_text(report)
    assert "attempt 1" not in render_text(report)  # a shard's first upload: the header says the run's attempt


# a finished run that fails its gate three ways: a shard missing, a benchmark two shards measured
OVERLAP = {"benchmark": "parser::lex", "shards": ["linter", "codegen"], "executor": "valgrind", "in_shards": 2}
FAILING_RUN = {
    "state": "forwarded",
    "shards": [{"name": "1", "state": "arrived"}, {"name": "2", "display": "codegen", "state": "missing"}],
    "overlaps": [OVERLAP],
    "overlaps_total": 1,
}


def test_every_failing_exit_says_why_and_each_other_reason_too():
    """Exit 14 with an empty stderr while the summary said 6 regressions; 11 said nothing of its shards."""
    from codspeed_client.report import exit_sentences

    report = FAILING_RUN
    regressed = "1 benchmark regressed past 5% against the baseline: worst parser::lex +12.0%"
    said = exit_sentences(report, 11, regressed, False, False)
    assert said[0] == "exit 11: 1 shard missing, never came: codegen"
    assert said[1].startswith("also: benchmarks measured in more than one shard") and "parser::lex" in said[1]
    assert said[2] == f"also: {regressed}"
    whole = {**report, "shards": report["shards"][:1]}
    assert exit_sentences(whole, 14, regressed, False, False)[0].startswith("exit 14: benchmarks measured in more")
    assert exit_sentences(whole, 13, regressed, False, True) == [f"exit 13: {regressed}"]  # overlaps allowed
    closing = {**whole, "state": "open", "closing": "closing: waiting for shard 2's bundle"}
    assert exit_sentences(closing, 12, None, True, True) == [
        "exit 12: the run is not final yet (closing: waiting for shard 2's bundle)"
    ]
    assert exit_sentences(whole, 0, None, False, True) == []


@pytest.mark.parametrize(
    "cpuinfo, cores",
    [
        ("".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t: {i // 2}\n\n" for i in range(4)), 2),  # SMT
        ("".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t: {i}\n\n" for i in range(4)), 4),  # none
        ("".join(f"processor\t: {i}\nphysical id\t: {i // 2}\ncore id\t: 0\n\n" for i in range(4)), 2),  # 2 sockets
        ("".join(f"processor\t: {i}\nFeatures\t: fp asimd\n\n" for i in range(4)), 4),  # aarch64: no core id
    ],
    ids=["smt", "no-smt", "two-sockets", "aarch64"],
)
def test_machine_fields_are_computed_as_the_runners_sysinfo_computes_them(tmp_path, monkeypatch, cpuinfo, cores):
    """The runner (src/system/info.rs, 5.0.2): ``System::physical_core_count()`` (sysinfo: distinct core
    and physical id pairs), ``total_memory().div_ceil(1024^3)``, the first processor's flags split and
    sorted, duplicates kept, ``[]`` when /proc/cpuinfo says none. The client sent os.cpu_count() (logical),
    memory to the nearest GiB (31.3 GiB: 31, the runner 32), and de-duplicated flags."""
    from codspeed_client import system

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        cpuinfo.replace("processor\t: 0\n", "processor\t: 0\nflags\t: sse avx sse\n")
    )
    (tmp_path / "proc/meminfo").write_text(f"MemTotal:       {int(31.3 * (1 << 20))} kB\n")
    monkeypatch.setattr(system.platform, "system", lambda: "Linux")
    found = system.machine(str(tmp_path))
    assert (found["cpuCores"], found["totalMemoryGb"]) == (cores, 32)
    assert found["cpuFlags"] == ["avx", "sse", "sse"]
    (tmp_path / "proc/cpuinfo").write_text("")  # unreadable: the runner sends [] and "unknown"
    unread = system.machine(str(tmp_path))
    assert unread["cpuFlags"] == [] and unread["cpuCores"] == os.cpu_count() and unread["cpuName"] == "cpu0"


def test_another_threshold_than_the_report_s_counts_a_benchmark_two_shards_measured_once():
    from codspeed_client.report import regressions_past

    class Pages:  # each shard's page, as GET /v1/runs/…/benchmarks?shard= answers it
        def shard_benchmarks(self, project, run_id, shard):
            twin = {"name": "t::same", "shard": shard, "unit": "cycles", "change": 0.12}
            own = {"name": f"t::{shard}", "shard": shard, "unit": "cycles", "change": 0.02}
            return {"benchmarks": [twin, own]}

    report = {"project": "a/b", "run_id": "1", "threshold": 0.05, "shards": [{"name": "linter"}, {"name": "codegen"}]}
    assert regressions_past(Pages(), report, 0.01) == (
        "3 benchmarks regressed past 1% against the baseline: worst t::same +12.0%"
    )


def test_status_prints_a_tokenless_runs_merged_uploads_run_hashes_and_a_rejected_shard_fails_the_gate_with_why():
    from codspeed_client.report import exit_sentences, final_exit_code, render_text

    upstream = {"status": "success", "at": "2026-12-07T07:00:00Z", "run_id": "u1", "run_hashes": ["ab" * 32]}
    report = {"state": "forwarded", "partial": False, "run_id": "r", "project": "o/p", "arrived": 1, "expected": 2}
    report |= {"upstream": upstream, "shards": [{"name": "1", "state": "arrived"}]}
    assert f"CodSpeed Run Hash {'ab' * 32}" in render_text(report)  # what finds a fork's run on CodSpeed
    refused = {"name": "2", "state": "rejected", "reason": "given back by its client: its bundle would be refused"}
    report["shards"].append(refused)
    assert final_exit_code(report, timed_out=False) == 11  # its benchmarks never came: was exit 0
    assert exit_sentences(report, 11, None, False, False) == [
        "exit 11: 1 shard rejected, their bundle refused: 2 (given back by its client: its bundle would be refused)"
    ]
