"""One model of a CI job, the runner's: for each CI and event, the environment and event payload a
job gets (as each CI documents them) and a real git checkout give the fields CodSpeed's runner (5.0.2,
and PR #482 for CircleCI) would upload for that job, written out here from its source
(``src/run_environment/*/provider.rs``); the client's metadata for a shard pushed from the same job
must say the same. Where the client must differ, ``DIFFERS`` says so, and docs/protocol.md says why."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from codspeed_client import metadata
from codspeed_client.ci_providers import detect
from codspeed_rules.runner_json import RUNNER_ORDER, compact, pushed_part_id
from tests.factories import pull_request_checkout

# What the client says differently, and why (docs/protocol.md): its own name; the part it pushes is the
# aggregator's (the run it is pushed to, the aggregator's id for the shard: invariant 15); and on
# Buildkite, where the runner sends no runPart at all, the client's part still names its run and shard.
DIFFERS = ("runner.name", "runPart.runId", "runPart.runPartId")
COMPARED = tuple(
    f for f in RUNNER_ORDER if f not in ("profileMd5", "profileEncoding", "runner", "runPart", "tokenless")
)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A clone as a CI job has it: main's tip, a pull request's head on ``feature``, and GitHub's (or
    GitLab's) merge commit of the head into main, checked out detached as ``refs/pull/N/merge`` is."""
    repo = tmp_path / "widgets"
    commits = pull_request_checkout(repo)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/widgets.git"], check=True)
    monkeypatch.chdir(repo)
    return repo, commits


def at(repo: Path, commit: str) -> None:
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", commit], check=True)


SENDER = {"id": "583231", "login": "octocat"}
GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_REPOSITORY": "acme/widgets",
    "GITHUB_RUN_ID": "7044765741",
    "GITHUB_JOB": "bench",
    "GITHUB_ACTOR": "octocat",
    "GITHUB_ACTOR_ID": "583231",
    "GITHUB_BASE_REF": "",  # GitHub sets it empty outside a pull request
    "GITHUB_HEAD_REF": "",
}


def _github_pr(fork: bool) -> dict:
    """GitHub's pull_request payload (the fields the runner reads): a fork's head repository has its own id."""
    base = {"id": 1296269, "full_name": "acme/widgets", "owner": {"login": "acme"}}
    head = {"id": 7777, "full_name": "forker/widgets", "owner": {"login": "forker"}} if fork else base
    return {
        "repository": {**base, "private": False},
        "pull_request": {
            "number": 7,
            "head": {"ref": "feature", "sha": "{head}", "repo": head},
            "base": {"ref": "main", "sha": "{base}", "repo": base},
        },
    }


def _github_fields(commit: str, ref: str, head_ref, base_ref, event: str) -> dict:
    return {
        "repositoryProvider": "GITHUB",
        "version": 10,
        "runEnvironment": "GITHUB_ACTIONS",
        "commitHash": commit,
        "allowEmpty": False,
        "ref": ref,
        "headRef": head_ref,
        "baseRef": base_ref,
        "owner": "acme",
        "repository": "widgets",
        "event": event,
        "sender": SENDER,
        "ghData": {"runId": "7044765741", "job": "bench"},
        "glData": None,
        "localData": None,
        "repositoryRootPath": "{root}/",
    }


GITLAB = {
    "GITLAB_CI": "true",
    "CI_PROJECT_PATH": "acme/perf/widgets",
    "CI_PROJECT_NAMESPACE": "acme/perf",
    "CI_PROJECT_NAME": "widgets",
    "CI_PIPELINE_ID": "880",
    "CI_JOB_ID": "5551",
    "CI_JOB_NAME": "bench",
    "CI_COMMIT_REF_NAME": "main",
    "GITLAB_USER_ID": "42",
    "GITLAB_USER_LOGIN": "octocat",
    "CI_PROJECT_DIR": "{root}",
}
GITLAB_MR = {
    **GITLAB,
    "CI_PIPELINE_SOURCE": "merge_request_event",
    "CI_COMMIT_REF_NAME": "feature",
    "CI_MERGE_REQUEST_IID": "5",
    "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
    "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": "acme/perf/widgets",
}


def _gitlab_fields(commit: str, ref: str, head_ref, base_ref, event: str) -> dict:
    return {
        "repositoryProvider": "GITLAB",
        "version": 10,
        "runEnvironment": "GITLAB_CI",
        "commitHash": commit,
        "allowEmpty": False,
        "ref": ref,
        "headRef": head_ref,
        "baseRef": base_ref,
        "owner": "acme/perf",
        "repository": "widgets",
        "event": event,
        "sender": {"id": "42", "login": "octocat"},
        "ghData": None,
        "glData": {"runId": "5551", "job": "bench"},
        "localData": None,
        "repositoryRootPath": "{root}",  # CI_PROJECT_DIR as it is
    }


BUILDKITE = {
    "BUILDKITE": "true",
    "BUILDKITE_REPO": "git@github.com:acme/widgets.git",
    "BUILDKITE_BUILD_ID": "0190-b",
    "BUILDKITE_BRANCH": "main",
    "BUILDKITE_PULL_REQUEST": "false",
    "BUILDKITE_LABEL": "bench",
}


def _buildkite_fields(commit: str, ref: str, head_ref, base_ref, event: str) -> dict:
    return {
        **_github_fields(commit, ref, head_ref, base_ref, event),
        "runEnvironment": "BUILDKITE",
        "sender": None,
        "ghData": None,
    }


CIRCLECI = {
    "CIRCLECI": "true",
    "CIRCLE_REPOSITORY_URL": "git@github.com:acme/widgets.git",
    "CIRCLE_PROJECT_USERNAME": "acme",
    "CIRCLE_PROJECT_REPONAME": "widgets",
    "CIRCLE_WORKFLOW_ID": "6e1f3c2a-0b4d-4f5e-9a8b-7c6d5e4f3a2b",
    "CIRCLE_JOB": "bench",
    "CIRCLE_BRANCH": "main",
    "CIRCLE_NODE_INDEX": "1",
    "CIRCLE_NODE_TOTAL": "3",
    "CIRCLE_USERNAME": "octocat",  # set, but the runner sends no sender
    "CIRCLE_WORKING_DIRECTORY": "~/project",
}


def _circleci_fields(commit: str, ref: str, head_ref, base_ref, event: str) -> dict:
    fields = {**_github_fields(commit, ref, head_ref, None, event), "version": 11, "runEnvironment": "CIRCLECI"}
    fields.update(sender=None)
    del fields["ghData"], fields["glData"]  # metadata version 11
    return fields


SUFFIX = {"executor": "valgrind", "run-index": 0}
CASES = {
    # name: (environment, event payload or None, commit checked out, the runner's fields, its runPart's metadata)
    "github-push": (
        {**GITHUB, "GITHUB_REF": "refs/heads/main", "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "{base}"},
        {"repository": {"private": False}},
        "base",
        _github_fields("{base}", "refs/heads/main", None, "", "push"),
        SUFFIX,
    ),
    "github-tag": (
        {**GITHUB, "GITHUB_REF": "refs/tags/v1.0", "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "{base}"},
        {"repository": {"private": False}},
        "base",
        _github_fields("{base}", "refs/tags/v1.0", None, "", "push"),
        SUFFIX,
    ),
    "github-pull-request": (
        {
            **GITHUB,
            "GITHUB_REF": "refs/pull/7/merge",
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_SHA": "{merge}",
            "GITHUB_BASE_REF": "main",
            "GITHUB_HEAD_REF": "feature",
        },
        _github_pr(fork=False),
        "merge",
        _github_fields("{merge}", "refs/pull/7/merge", "feature", "main", "pull_request"),
        SUFFIX,
    ),
    "github-fork-pull-request": (
        {
            **GITHUB,
            "GITHUB_REF": "refs/pull/7/merge",
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_SHA": "{merge}",
            "GITHUB_BASE_REF": "main",
            "GITHUB_HEAD_REF": "feature",
        },
        _github_pr(fork=True),
        "merge",
        _github_fields("{merge}", "refs/pull/7/merge", "forker:feature", "main", "pull_request"),
        SUFFIX,
    ),
    "github-matrix": (
        {
            **GITHUB,
            "GITHUB_REF": "refs/heads/main",
            "GITHUB_EVENT_NAME": "push",
            "GITHUB_SHA": "{base}",
            "GH_MATRIX": '{\n  "shard": 2\n}',
            "GH_STRATEGY": '{"fail-fast": true, "job-index": 1, "job-total": 4, "max-parallel": 4}',
        },
        {"repository": {"private": False}},
        "base",
        _github_fields("{base}", "refs/heads/main", None, "", "push"),
        {"executor": "valgrind", "job-index": 1, "job-total": 4, "run-index": 0, "shard": 2},
    ),
    "gitlab-push": (
        {**GITLAB, "CI_PIPELINE_SOURCE": "push", "CI_COMMIT_SHA": "{base}"},
        None,
        "base",
        _gitlab_fields("{base}", "refs/heads/main", None, "main", "push"),
        SUFFIX,
    ),
    "gitlab-tag": (
        {**GITLAB, "CI_PIPELINE_SOURCE": "push", "CI_COMMIT_TAG": "v1.0", "CI_COMMIT_REF_NAME": "v1.0"},
        None,
        "base",
        _gitlab_fields("{base}", "refs/tags/v1.0", None, "v1.0", "push"),
        SUFFIX,
    ),
    "gitlab-merge-request": (  # a merged results pipeline: HEAD is GitLab's merge commit
        {**GITLAB_MR, "CI_COMMIT_SHA": "{merge}", "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": "{head}"},
        None,
        "merge",
        _gitlab_fields("{merge}", "refs/pull/5/merge", "feature", "main", "pull_request"),
        SUFFIX,
    ),
    "gitlab-fork-merge-request": (
        {**GITLAB_MR, "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": "forker/widgets", "CI_COMMIT_SHA": "{head}"},
        None,
        "head",
        _gitlab_fields("{head}", "refs/pull/5/merge", "forker:feature", "main", "pull_request"),
        SUFFIX,
    ),
    "buildkite-push": (
        {**BUILDKITE, "BUILDKITE_COMMIT": "{base}"},
        None,
        "base",
        _buildkite_fields("{base}", "refs/heads/main", None, None, "push"),
        SUFFIX,
    ),
    "buildkite-pull-request": (
        {
            **BUILDKITE,
            "BUILDKITE_COMMIT": "{head}",
            "BUILDKITE_BRANCH": "feature",
            "BUILDKITE_PULL_REQUEST": "7",
            "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main",
        },
        None,
        "merge",
        _buildkite_fields("{merge}", "refs/pull/7/merge", "feature", "main", "pull_request"),
        SUFFIX,
    ),
    "circleci-push": (
        {**CIRCLECI, "CIRCLE_SHA1": "{base}"},
        None,
        "base",
        _circleci_fields("{base}", "refs/heads/main", None, None, "push"),
        {"executor": "valgrind", "node-index": 1, "node-total": 3, "run-index": 0},
    ),
    "circleci-pull-request": (
        {
            **CIRCLECI,
            "CIRCLE_SHA1": "{head}",
            "CIRCLE_BRANCH": "feature",
            "CIRCLE_PULL_REQUEST": "https://github.com/acme/widgets/pull/22",
        },
        None,
        "merge",
        _circleci_fields("{merge}", "refs/pull/22/merge", "feature", None, "pull_request"),
        {"executor": "valgrind", "node-index": 1, "node-total": 3, "run-index": 0},
    ),
    "circleci-fork-pull-request": (  # CircleCI names a fork's pull request by CIRCLE_PR_NUMBER alone
        {**CIRCLECI, "CIRCLE_SHA1": "{head}", "CIRCLE_BRANCH": "pull/23", "CIRCLE_PR_NUMBER": "23"},
        None,
        "merge",
        _circleci_fields("{merge}", "refs/pull/23/merge", "pull/23", None, "pull_request"),
        {"executor": "valgrind", "node-index": 1, "node-total": 3, "run-index": 0},
    ),
    "local": (
        {},
        None,
        "base",
        {
            **_github_fields("{base}", "{base}", "main", None, "local"),
            "runEnvironment": "LOCAL",
            "sender": None,
            "ghData": None,
            "localData": {"expectedRunPartsCount": 2},
        },
        {"executor": "valgrind"},  # a local run is a run of its own: no run index
    ),
}


def _filled(value, names: dict):
    if isinstance(value, str):
        return value.format(**names) if "{" in value and not value.startswith("{\n") and '":' not in value else value
    if isinstance(value, dict):
        return {k: _filled(v, names) for k, v in value.items()}
    return value


@pytest.mark.parametrize("case", list(CASES))
def test_the_clients_part_says_what_the_runner_says_for_the_same_job(checkout, tmp_path, case):
    repo, commits = checkout
    env, payload, checked_out, runner_fields, part_metadata = CASES[case]
    names = {**commits, "root": str(repo)}
    if checked_out == "base":
        at(repo, "main")
    elif checked_out == "head":
        at(repo, "feature")
    env = _filled(env, names)
    if payload is not None:
        event = tmp_path / "event.json"
        event.write_text(json.dumps(_filled(payload, names)))
        env["GITHUB_EVENT_PATH"] = str(event)
    ctx = detect(env)
    project = ctx.project or "acme/widgets"
    sent = metadata.build(
        ctx, project=project, run_id="r1", commit=ctx.commit or "", shard="1", md5="A" * 22 + "==", expected_parts=2
    )
    expected = _filled(runner_fields, names)
    assert {f: sent.get(f, "(absent)") for f in COMPARED} == {f: expected.get(f, "(absent)") for f in COMPARED}
    assert sent["runPart"]["metadata"] == part_metadata and list(sent["runPart"]["metadata"]) == sorted(part_metadata)
    assert sent["runPart"]["jobName"] == ("local-job" if case == "local" else "bench")
    # where the client differs, and only there
    assert (sent["runner"]["name"], sent["runPart"]["runId"], sent["runPart"]["runPartId"]) == (
        "codspeed-client",
        "r1",
        pushed_part_id("1", "valgrind"),
    )
    # the runner's field order, and its compact bytes
    assert [k for k in sent if k in RUNNER_ORDER] == [k for k in RUNNER_ORDER if k in sent]
    assert metadata.body(sent) == compact(sent) and b": " not in metadata.body(sent)


def test_what_people_are_shown_is_the_pull_requests_head_while_the_merge_commit_is_sent(checkout, tmp_path):
    repo, commits = checkout
    event = tmp_path / "event.json"
    event.write_text(json.dumps(_filled(_github_pr(fork=True), commits)))
    env = {
        **GITHUB,
        "GITHUB_REF": "refs/pull/7/merge",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_SHA": commits["merge"],
        "GITHUB_EVENT_PATH": str(event),
    }
    ctx = detect(env)
    assert (ctx.commit, ctx.head_commit, ctx.fork) == (commits["merge"], commits["head"], "forker/widgets")
    gitlab = detect(
        _filled({**GITLAB_MR, "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA": "{head}"}, {**commits, "root": str(repo)})
    )
    assert (gitlab.commit, gitlab.head_commit) == (commits["merge"], commits["head"])


def test_circlecis_working_directory_is_expanded_where_no_checkout_is_found(tmp_path, monkeypatch):
    """The runner's fallback for the repository's root: CIRCLE_WORKING_DIRECTORY, ``~`` expanded."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/circleci")
    ctx = detect({**CIRCLECI, "CIRCLE_SHA1": "5" * 40})
    assert (ctx.repository_root, ctx.commit) == ("/home/circleci/project/", "5" * 40)


def test_json_is_read_as_serde_json_reads_it_into_a_value():
    """Each rule of ``runner_json.read`` beside serde_json's: RFC 8259's grammar (no NaN or Infinity), a
    number past f64's range refused, an integer past u64 (or below i64) a float, no lone surrogate."""
    from codspeed_rules.runner_json import U64_MAX, NotSerdeJson, read, same

    assert read(f'{{"a":{U64_MAX}}}') == {"a": U64_MAX} and isinstance(read(f"[{U64_MAX + 1}]")[0], float)
    assert isinstance(read(f"[{-(2**63)}]")[0], int) and isinstance(read(f"[{-(2**63) - 1}]")[0], float)
    assert read('["\\ud83d\\ude00"]') == ["\U0001f600"]  # a pair is one character
    for body, where in (('{"a":[NaN]}', "a[0]"), ('{"a":{"b":1e400}}', "a.b"), ('["\\ud800"]', "[0]")):
        with pytest.raises(NotSerdeJson, match=rf"^{re.escape(where)}: "):
            read(body)
    assert not same(10, 10.0) and not same(1, True) and not same(0.0, -0.0) and same({"a": [1]}, {"a": [1]})
