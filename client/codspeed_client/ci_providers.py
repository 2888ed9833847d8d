"""How each CI says what it says about a job, as CodSpeed's runner reads it (its providers):
GitHub Actions, GitLab CI, Buildkite, CircleCI, and git outside any CI."""

from __future__ import annotations

import json
import os
import re
import sys

from . import git
from .ci import CiContext

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any


def detect(env: dict[str, str] | None = None) -> CiContext:
    """What the CI (or git outside any) says of this job, from ``env`` (the process's by default)."""
    return read(dict(os.environ if env is None else env))


def read(env: dict[str, str]) -> CiContext:
    """What the CI this job runs in says of it, or git outside any."""
    if env.get("GITHUB_ACTIONS") == "true":
        return github(env)
    if env.get("GITLAB_CI") == "true":
        return gitlab(env)
    if env.get("BUILDKITE") == "true":
        return buildkite(env)
    if env.get("CIRCLECI") == "true":
        return circleci(env)
    return local()


_MERGE_REF = re.compile(r"^refs/pull/[0-9]+/merge$")


def github(env: dict[str, str]) -> CiContext:
    """A GitHub Actions job, as the runner's github_actions provider says it: the commit is the
    checkout's ``HEAD`` (on a pull request, GitHub's merge commit, ``refs/pull/N/merge``); a pull
    request's head branch is ``owner:branch`` when its repository's id is not the base's (a fork).
    What a reviewer is shown stays on the pull request's head (``head_commit``)."""
    event_name, repository = env.get("GITHUB_EVENT_NAME"), env.get("GITHUB_REPOSITORY")
    name = (repository or "/").split("/", 1)[1]
    top, head = git.checkout(env.get("GITHUB_WORKSPACE"))
    ctx = CiContext(
        provider="GITHUB_ACTIONS",
        project=repository,
        run_id=env.get("GITHUB_RUN_ID"),
        commit=head or env.get("GITHUB_SHA"),
        ref=env.get("GITHUB_REF"),
        base_ref=env.get("GITHUB_BASE_REF"),  # as GitHub sets it: "" outside a pull request
        event=event_name,
        job=env.get("GITHUB_JOB"),
        sender={"id": env.get("GITHUB_ACTOR_ID", ""), "login": env["GITHUB_ACTOR"]}
        if env.get("GITHUB_ACTOR")
        else None,
        extra={"ghData": {"runId": env.get("GITHUB_RUN_ID"), "job": env.get("GITHUB_JOB")}},
        repository_root=git.rooted(top, env.get("GITHUB_WORKSPACE") or f"/home/runner/work/{name}/{name}"),
        run_attempt=env.get("GITHUB_RUN_ATTEMPT"),
        part_metadata=_matrix(env),
        ci_url=_github_run_page(env, repository),
        runner=env.get("RUNNER_NAME"),
    )
    if event_name in ("pull_request", "pull_request_target") and env.get("GITHUB_EVENT_PATH"):
        pr = _pull_request(env["GITHUB_EVENT_PATH"])
        if pr is not None:
            _with_pull_request(ctx, pr)
    return ctx


def _github_run_page(env: dict[str, str], repository: str | None) -> str | None:
    if not repository or not env.get("GITHUB_RUN_ID"):
        return None
    return f"{env.get('GITHUB_SERVER_URL') or 'https://github.com'}/{repository}/actions/runs/{env['GITHUB_RUN_ID']}"


def _pull_request(path: str) -> dict[str, Any] | None:
    """The event's pull request (None: the event file cannot be read, said, not swallowed: the run
    then shows the commit sent)."""
    try:
        with open(path) as f:
            pr: dict[str, Any] = json.load(f).get("pull_request") or {}
            return pr
    except (OSError, ValueError) as exc:
        print(
            f"::warning title=codspeed-client::GITHUB_EVENT_PATH {path} cannot be read "
            f"({type(exc).__name__}: {exc}): the pull request's head, base and fork are not known",
            file=sys.stderr,
        )
        return None


def _with_pull_request(ctx: CiContext, pr: dict[str, Any]) -> None:
    """What a pull request's event adds: its head, the base it was built on, its fork, its head branch."""
    head_sha, tip = (pr.get("head") or {}).get("sha"), (pr.get("base") or {}).get("sha")
    ctx.head_commit = head_sha
    ctx.base_commit = git.merge_base(ctx.repository_root, tip, head_sha) or tip
    ctx.fork = _fork(pr)
    if _MERGE_REF.match(ctx.ref or ""):  # the runner names a head branch on a pull request's merge ref only
        ctx.head_ref = _head_branch(pr)


def _matrix(env: dict[str, str]) -> dict[str, Any]:
    """A matrix job's keys as the runner puts them in its runPart's metadata: ``GH_MATRIX`` and
    ``GH_STRATEGY`` (``toJson(matrix)``, ``toJson(strategy)``, which CodSpeed's action sets), the
    strategy without fail-fast and max-parallel; nothing outside a matrix."""
    try:
        matrix, strategy = json.loads(env.get("GH_MATRIX") or "null"), json.loads(env.get("GH_STRATEGY") or "null")
    except ValueError:
        return {}
    if not isinstance(matrix, dict) or not isinstance(strategy, dict):
        return {}
    return {**matrix, **{k: v for k, v in strategy.items() if k not in ("fail-fast", "max-parallel")}}


def _fork(pr: dict[str, Any]) -> str | None:
    """The head repository of a pull request from a fork, else None. The runner's test: the head
    repository's id is not the base's (GitHub's event payload; ``head.repo`` is null once the fork is
    deleted)."""
    base = (pr.get("base") or {}).get("repo") or {}
    if not base or not pr.get("head"):
        return None
    head = pr["head"].get("repo") or {}
    if not head:
        return "a deleted fork"
    return None if _same_repository(head, base) else head.get("full_name") or "a deleted fork"


def _same_repository(head: dict[str, Any], base: dict[str, Any]) -> bool:
    """By id where both say it, else by name."""
    if "id" in head and "id" in base:
        return bool(head.get("id") == base.get("id"))
    return bool(head.get("full_name") == base.get("full_name"))


def _head_branch(pr: dict[str, Any]) -> str | None:
    """A pull request's ``headRef`` in the runner's words: its branch, ``owner:branch`` from a fork."""
    branch = (pr.get("head") or {}).get("ref")
    if not branch or not _fork(pr):
        return branch
    owner = (((pr["head"].get("repo") or {}).get("owner")) or {}).get("login")
    return f"{owner}:{branch}" if owner else branch


def _shard(index: str | None, total: str | None, first: int) -> str | None:
    """``I/N`` from a CI's own parallelism (GitLab counts from 1, Buildkite from 0)."""
    if index is None or total is None or not index.isdigit() or not total.isdigit():
        return None
    return f"{int(index) + 1 - first}/{total}"


GITLAB_EVENTS = {
    "merge_request_event": "pull_request",
    "push": "push",
    "schedule": "schedule",
    "trigger": "workflow_dispatch",
    "web": "workflow_dispatch",
    "api": "workflow_dispatch",
}


def gitlab(env: dict[str, str]) -> CiContext:
    """A GitLab job, as the runner's gitlab_ci provider says it: a merge request is
    ``refs/pull/IID/merge`` against its target branch, a fork's head named ``owner:branch``; a push,
    a schedule or a pipeline started by hand is the branch (or tag); the commit is ``HEAD`` of
    ``CI_PROJECT_DIR`` (in a merged results pipeline, GitLab's merge commit)."""
    source = env.get("CI_PIPELINE_SOURCE")
    ref, head_ref, base_ref, fork = _gitlab_refs(env)
    sender = (
        {"id": env.get("GITLAB_USER_ID", ""), "login": env["GITLAB_USER_LOGIN"]}
        if env.get("GITLAB_USER_LOGIN")
        else None
    )
    root = env.get("CI_PROJECT_DIR")
    head = git.run("-C", root, "rev-parse", "HEAD") if root else None
    return CiContext(
        provider="GITLAB_CI",
        project=env.get("CI_PROJECT_PATH"),  # group/subgroup/repo
        run_id=env.get("CI_PIPELINE_ID"),
        commit=head or env.get("CI_COMMIT_SHA"),
        ref=ref,
        head_ref=head_ref,
        base_ref=base_ref,
        event=GITLAB_EVENTS.get(source or "", source),
        sender=sender,
        job=env.get("CI_JOB_NAME"),
        extra={"glData": {"runId": env.get("CI_JOB_ID"), "job": env.get("CI_JOB_NAME")}},
        repository_root=root,  # the runner's: CI_PROJECT_DIR as it is
        shard=_shard(env.get("CI_NODE_INDEX"), env.get("CI_NODE_TOTAL"), 1),
        ci_url=env.get("CI_PIPELINE_URL") or None,
        fork=fork,
        head_commit=env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA") or None,
        # the merge request's merge base (its diff's base); else, in a merged results pipeline, the target's tip
        base_commit=env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA") or env.get("CI_MERGE_REQUEST_TARGET_BRANCH_SHA") or None,
    )


def _gitlab_refs(env: dict[str, str]) -> tuple[str | None, str | None, str | None, str | None]:
    """The ref, head branch, base branch and fork: a merge request's ``refs/pull/IID/merge`` against
    its target branch (a fork's head ``owner:branch``), else the tag or branch pushed."""
    tag, branch = env.get("CI_COMMIT_TAG"), env.get("CI_COMMIT_REF_NAME")
    if env.get("CI_PIPELINE_SOURCE") != "merge_request_event" or not env.get("CI_MERGE_REQUEST_IID"):
        return (f"refs/tags/{tag}" if tag else f"refs/heads/{branch}" if branch else None), None, branch or None, None
    head_ref = env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or None
    origin, fork = env.get("CI_MERGE_REQUEST_SOURCE_PROJECT_PATH"), None
    if origin and origin != env.get("CI_PROJECT_PATH"):
        fork, head_ref = origin, f"{origin.split('/')[0]}:{head_ref}"
    ref = f"refs/pull/{env['CI_MERGE_REQUEST_IID']}/merge"
    return ref, head_ref, env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME"), fork


def buildkite(env: dict[str, str]) -> CiContext:
    """A Buildkite job, as the runner's buildkite provider says it: a pull request is
    ``refs/pull/N/merge``, its branch the head and its base branch the base; the commit is the
    checkout's ``HEAD``."""
    pull = env.get("BUILDKITE_PULL_REQUEST", "false")
    pull_request = pull.isdigit()
    top, head = git.checkout(env.get("BUILDKITE_BUILD_CHECKOUT_PATH"))
    folder = "/".join(
        env.get(k, "") for k in ("BUILDKITE_AGENT_NAME", "BUILDKITE_ORGANIZATION_SLUG", "BUILDKITE_PIPELINE_SLUG")
    )
    return CiContext(
        provider="BUILDKITE",
        project=git.project_of_remote(env.get("BUILDKITE_REPO", "")),
        run_id=env.get("BUILDKITE_BUILD_ID"),
        commit=head or git.resolved(env.get("BUILDKITE_COMMIT")),
        ref=f"refs/pull/{pull}/merge"
        if pull_request
        else (f"refs/heads/{env['BUILDKITE_BRANCH']}" if env.get("BUILDKITE_BRANCH") else None),
        head_ref=env.get("BUILDKITE_BRANCH") if pull_request else None,
        base_ref=env.get("BUILDKITE_PULL_REQUEST_BASE_BRANCH") if pull_request else None,
        event="pull_request" if pull_request else "push",
        job=env.get("BUILDKITE_LABEL"),
        repository_root=git.rooted(top, f"/buildkite/builds/{folder}"),
        shard=_shard(env.get("BUILDKITE_PARALLEL_JOB"), env.get("BUILDKITE_PARALLEL_JOB_COUNT"), 0),
        ci_url=env.get("BUILDKITE_BUILD_URL") or None,
    )


def circleci(env: dict[str, str]) -> CiContext:
    """A CircleCI job, as the runner's CircleCI provider says it (CodSpeedHQ/codspeed PR #482): the
    workflow is the run (a "rerun workflow" gets a new workflow id: a new run), a job's
    ``parallelism`` nodes its shards (``CIRCLE_NODE_INDEX`` from 0 of ``CIRCLE_NODE_TOTAL``); a pull
    request is named by its URL (``CIRCLE_PULL_REQUEST``) or, from a fork, by ``CIRCLE_PR_NUMBER``
    alone, and is ``refs/pull/N/merge``; no sender, no base branch."""
    pull, branch = _circleci_pull(env), env.get("CIRCLE_BRANCH")
    tag = env.get("CIRCLE_TAG")
    ref = (
        f"refs/pull/{pull}/merge" if pull else f"refs/heads/{branch}" if branch else f"refs/tags/{tag}" if tag else None
    )
    project = _circleci_project(env)
    working = os.path.expanduser(env.get("CIRCLE_WORKING_DIRECTORY") or "~/project")
    top, head = git.checkout(working)
    return CiContext(
        provider="CIRCLECI",
        project=project,
        run_id=env.get("CIRCLE_WORKFLOW_ID"),
        commit=head or env.get("CIRCLE_SHA1"),
        ref=ref,
        head_ref=branch if pull else None,
        event="pull_request" if pull else "push",
        job=env.get("CIRCLE_JOB"),
        repository_root=git.rooted(top, working),
        ci_url=env.get("CIRCLE_BUILD_URL") or None,
        shard=_shard(env.get("CIRCLE_NODE_INDEX"), env.get("CIRCLE_NODE_TOTAL"), 0),
        part_metadata={
            "node-index": _number(env.get("CIRCLE_NODE_INDEX"), 0),
            "node-total": _number(env.get("CIRCLE_NODE_TOTAL"), 1),
        },
        fork=_circleci_fork(env, project),
        head_commit=env.get("CIRCLE_SHA1") if pull else None,
    )


def _circleci_pull(env: dict[str, str]) -> str:
    """The pull request's number ("" on a push): from its URL, or from a fork's ``CIRCLE_PR_NUMBER``."""
    from_url = (env.get("CIRCLE_PULL_REQUEST") or "").rstrip("/").rsplit("/", 1)[-1]
    pull = from_url if from_url.isdigit() else env.get("CIRCLE_PR_NUMBER", "")
    return pull if pull.isdigit() else ""


def _circleci_project(env: dict[str, str]) -> str | None:
    """owner/repo, from the repository's URL, else CircleCI's project names."""
    project = git.project_of_remote(env.get("CIRCLE_REPOSITORY_URL", ""))
    owner, name = env.get("CIRCLE_PROJECT_USERNAME"), env.get("CIRCLE_PROJECT_REPONAME")
    return f"{owner}/{name}" if project is None and owner and name else project


def _circleci_fork(env: dict[str, str], project: str | None) -> str | None:
    """A fork's repository, on a pull request from one (``CIRCLE_PR_NUMBER``: "only available on
    forked PRs", CircleCI's docs)."""
    if not env.get("CIRCLE_PR_NUMBER"):
        return None
    repository = env.get("CIRCLE_PR_REPONAME") or (project or "/").rsplit("/", 1)[-1]
    return f"{env.get('CIRCLE_PR_USERNAME') or 'a fork'}/{repository}"


def _number(value: str | None, default: int) -> int:
    return int(value) if value and value.isdigit() else default


def local() -> CiContext:
    """A run outside CI, as the runner's local provider says it: the ref is the ``HEAD`` commit, the
    head branch the branch checked out, the event ``local``; its ``localData`` (how many parts the run
    expects) is filled in by the command that knows."""
    remote = git.run("config", "--get", "remote.origin.url") or ""
    project = git.project_of_remote(remote) if remote else None
    # one git call for three answers: the top folder, the commit, the branch ("HEAD" when detached)
    answers = (git.run("rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD") or "").splitlines()
    root, commit, branch = (answers + [None, None, None])[:3]
    return CiContext(
        provider="LOCAL",
        project=project,
        commit=commit,
        ref=commit,
        head_ref=branch if branch and branch != "HEAD" else None,
        event="local",
        repository_root=git.rooted(root, "") if root else None,
        repository_provider="GITLAB" if "gitlab" in git.host(remote) else "GITHUB",
    )
