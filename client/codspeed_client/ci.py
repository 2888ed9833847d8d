"""What the CI (or git) says about this job: project, run id, commit, refs."""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any


class CiContext:
    """What the CI (or git) says about this job; None where it cannot tell. A plain class: the
    dataclasses module alone would add about 7 ms to every push's start-up."""

    def __init__(  # noqa: PLR0913 -- a record, each field a keyword: the dataclasses module would cost every push 10 ms
        self,
        provider: str = "LOCAL",
        project: str | None = None,
        run_id: str | None = None,
        commit: str | None = None,
        ref: str | None = None,
        head_ref: str | None = None,
        base_ref: str | None = None,
        event: str | None = None,
        job: str | None = None,
        sender: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        repository_root: str | None = None,
        run_attempt: str | None = None,
        shard: str | None = None,
        ci_url: str | None = None,
        base_commit: str | None = None,
        fork: str | None = None,
    ) -> None:
        self.provider, self.project, self.run_id, self.commit = provider, project, run_id, commit
        self.ref, self.head_ref, self.base_ref, self.event, self.job = ref, head_ref, base_ref, event, job
        self.sender = sender
        self.extra = extra or {}  # ghData / glData, as CodSpeed's metadata wants them
        self.repository_root = repository_root
        self.run_attempt = run_attempt  # a CI re-run of the same run (GitHub's GITHUB_RUN_ATTEMPT)
        self.shard = shard  # I/N when the CI splits the job itself (GitLab parallel, Buildkite parallelism)
        self.ci_url = ci_url  # the CI run's page, as the CI names it
        self.base_commit = base_commit  # the base branch's commit a pull request's code is built on
        self.fork = fork  # the repository a pull request comes from, when not the project's own (no secrets there)


def _git(*args: str) -> str | None:
    # here, not above: a CI job asks git for a pull request's merge base only, and the import costs 4 ms
    import subprocess

    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def detect(env: dict[str, str] | None = None) -> CiContext:
    env = dict(os.environ if env is None else env)
    if env.get("GITHUB_ACTIONS") == "true":
        return _github(env)
    if env.get("GITLAB_CI") == "true":
        return _gitlab(env)
    if env.get("BUILDKITE") == "true":
        return _buildkite(env)
    if env.get("CIRCLECI") == "true":
        return _circleci(env)
    return _local()


def _github(env: dict[str, str]) -> CiContext:
    event_name = env.get("GITHUB_EVENT_NAME")
    ctx = CiContext(
        provider="GITHUB_ACTIONS",
        project=env.get("GITHUB_REPOSITORY"),
        run_id=env.get("GITHUB_RUN_ID"),
        commit=env.get("GITHUB_SHA"),
        ref=env.get("GITHUB_REF"),
        head_ref=env.get("GITHUB_HEAD_REF") or None,
        base_ref=env.get("GITHUB_BASE_REF") or None,
        event=event_name,
        job=env.get("GITHUB_JOB"),
        sender={"login": env["GITHUB_ACTOR"], "id": env.get("GITHUB_ACTOR_ID", "")}
        if env.get("GITHUB_ACTOR")
        else None,
        extra={"ghData": {"runId": env.get("GITHUB_RUN_ID"), "job": env.get("GITHUB_JOB")}},
        repository_root=env.get("GITHUB_WORKSPACE"),
        run_attempt=env.get("GITHUB_RUN_ATTEMPT"),
        ci_url=f"{env.get('GITHUB_SERVER_URL') or 'https://github.com'}/{env['GITHUB_REPOSITORY']}/actions/runs/"
        f"{env['GITHUB_RUN_ID']}"
        if env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID")
        else None,
    )
    if event_name in ("pull_request", "pull_request_target") and env.get("GITHUB_EVENT_PATH"):
        try:
            with open(env["GITHUB_EVENT_PATH"]) as f:
                pr = json.load(f).get("pull_request") or {}
            head, tip = (pr.get("head") or {}).get("sha"), (pr.get("base") or {}).get("sha")
            ctx.commit = head or ctx.commit  # the PR head, not the merge commit
            ctx.base_commit = _merge_base(ctx.repository_root, tip, head) or tip
            ctx.fork = _fork(pr)
        except (OSError, ValueError) as exc:  # said, not swallowed: the run then compares the merge commit
            print(
                f"::warning title=codspeed-client::GITHUB_EVENT_PATH {env['GITHUB_EVENT_PATH']} cannot be read "
                f"({type(exc).__name__}: {exc}): the pull request's head commit, base and fork are not known, so the "
                "shard goes under GITHUB_SHA",
                file=sys.stderr,
            )
    return ctx


def _merge_base(root: str | None, tip: str | None, head: str | None) -> str | None:
    """Where a pull request's head left its base branch, when the clone holds both histories
    (actions/checkout's default depth-1 clone does not: then the base branch's tip, which
    ``pull_request.base.sha`` is, stands in)."""
    if not tip or not head:
        return None
    return _git(*(("-C", root) if root else ()), "merge-base", tip, head)


def ancestors(root: str | None, commit: str, count: int) -> list[str]:
    """Up to ``count`` first-parent ancestors of ``commit``, the nearest first, as far as the
    clone holds them (none in a depth-1 clone): where the baseline is looked for when no run
    was forwarded at the base commit itself."""
    found = _git(*(("-C", root) if root else ()), "rev-list", "--first-parent", f"--max-count={count + 1}", commit)
    return found.split()[1:] if found else []


def changed_files(root: str | None, base: str, head: str | None = None) -> list[str] | None:
    """The paths the change touches, None when the clone cannot tell. Checked out as a merge commit
    of ``head`` (actions/checkout's ``refs/pull/N/merge``): what the merge adds to its first parent,
    the base branch as it was merged into, and nothing the base branch gained since ``base``; else
    the paths changed since ``base`` (the merge base)."""

    def git(*args: str) -> str | None:
        return _git(*(("-C", root) if root else ()), *args)

    if head and git("rev-parse", "--verify", "--quiet", "HEAD^2") == head:
        found = git("diff", "--name-only", "HEAD^1", "HEAD")
        return found.splitlines() if found else []
    found = git("diff", "--name-only", f"{base}...HEAD")
    if found is None:
        listed = git("rev-parse", "--verify", f"{base}^{{commit}}")
        return [] if listed else None  # no output: nothing changed, when git knows the base
    return found.splitlines()


def tracked_files(root: str | None) -> list[str] | None:
    """The repository's files as git tracks them, None when git cannot tell."""
    found = _git(*(("-C", root) if root else ()), "ls-files")
    return found.splitlines() if found is not None else None


def _fork(pr: dict[str, Any]) -> str | None:
    """The head repository of a pull request from a fork (GitHub's event payload: ``head.repo``
    is another repository than ``base.repo``, or null once the fork is deleted), else None."""
    base = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
    if not base or not pr.get("head"):
        return None
    head = (pr["head"].get("repo") or {}).get("full_name")
    return None if head == base else head or "a deleted fork"


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


def _gitlab(env: dict[str, str]) -> CiContext:
    """A GitLab job, described as CodSpeed's runner describes it (its gitlab_ci provider): a merge
    request is ``refs/pull/IID/merge`` against its target branch, a fork's head named
    ``owner:branch``; a push, a schedule or a pipeline started by hand is the branch (or tag)."""
    tag, branch, source = env.get("CI_COMMIT_TAG"), env.get("CI_COMMIT_REF_NAME"), env.get("CI_PIPELINE_SOURCE")
    ref = f"refs/tags/{tag}" if tag else f"refs/heads/{branch}" if branch else None
    head_ref, base_ref, fork = None, branch or None, None
    if source == "merge_request_event" and env.get("CI_MERGE_REQUEST_IID"):
        ref, base_ref = f"refs/pull/{env['CI_MERGE_REQUEST_IID']}/merge", env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME")
        head_ref = env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or None
        origin = env.get("CI_MERGE_REQUEST_SOURCE_PROJECT_PATH")
        if origin and origin != env.get("CI_PROJECT_PATH"):
            fork, head_ref = origin, f"{origin.split('/')[0]}:{head_ref}"
    sender = (
        {"id": env.get("GITLAB_USER_ID", ""), "login": env["GITLAB_USER_LOGIN"]}
        if env.get("GITLAB_USER_LOGIN")
        else None
    )
    return CiContext(
        provider="GITLAB_CI",
        project=env.get("CI_PROJECT_PATH"),
        run_id=env.get("CI_PIPELINE_ID"),  # group/subgroup/repo
        # in a merged results pipeline CI_COMMIT_SHA is GitLab's internal merge commit: the source branch's head is
        # the change
        commit=env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA") or env.get("CI_COMMIT_SHA"),
        ref=ref,
        head_ref=head_ref,
        base_ref=base_ref,
        event=GITLAB_EVENTS.get(source or "", source),
        sender=sender,
        job=env.get("CI_JOB_NAME"),
        extra={"glData": {"runId": env.get("CI_JOB_ID"), "job": env.get("CI_JOB_NAME")}},
        repository_root=env.get("CI_PROJECT_DIR"),
        shard=_shard(env.get("CI_NODE_INDEX"), env.get("CI_NODE_TOTAL"), 1),
        ci_url=env.get("CI_PIPELINE_URL") or None,
        fork=fork,
        # the merge request's merge base (its diff's base); else, in a merged results pipeline, the target's tip
        base_commit=env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA") or env.get("CI_MERGE_REQUEST_TARGET_BRANCH_SHA") or None,
    )


def project_of_remote(remote: str) -> str | None:
    """``owner/repo`` (or ``group/subgroup/repo``) of a git remote URL; None for a local path."""
    remote = remote.strip().removesuffix("/").removesuffix(".git")
    if remote.startswith(("/", ".", "file:")) or "://" not in remote and ":" not in remote:
        return None
    path = remote.split("://", 1)[1].split("/", 1)[-1] if "://" in remote else remote.split(":", 1)[1]
    return path if path.count("/") >= 1 else None


def _buildkite(env: dict[str, str]) -> CiContext:
    pull = env.get("BUILDKITE_PULL_REQUEST", "false")
    pull_request = pull not in ("", "false")
    return CiContext(
        provider="BUILDKITE",
        project=project_of_remote(env.get("BUILDKITE_REPO", "")),
        run_id=env.get("BUILDKITE_BUILD_ID"),
        commit=_resolved(env.get("BUILDKITE_COMMIT")),
        ref=f"refs/pull/{pull}/head"
        if pull_request
        else (f"refs/heads/{env['BUILDKITE_BRANCH']}" if env.get("BUILDKITE_BRANCH") else None),
        head_ref=env.get("BUILDKITE_BRANCH") if pull_request else None,
        base_ref=env.get("BUILDKITE_PULL_REQUEST_BASE_BRANCH") or None,
        event="pull_request" if pull_request else "push",
        job=env.get("BUILDKITE_LABEL"),
        repository_root=env.get("BUILDKITE_BUILD_CHECKOUT_PATH"),
        shard=_shard(env.get("BUILDKITE_PARALLEL_JOB"), env.get("BUILDKITE_PARALLEL_JOB_COUNT"), 0),
        ci_url=env.get("BUILDKITE_BUILD_URL") or None,
    )


def _circleci(env: dict[str, str]) -> CiContext:
    """A CircleCI job: the workflow is the run (a "rerun workflow" gets a new workflow id: a new
    run), a job's ``parallelism`` nodes its shards (``CIRCLE_NODE_INDEX`` from 0 of
    ``CIRCLE_NODE_TOTAL``); a pull request is named by its URL (``CIRCLE_PULL_REQUEST``), a fork's
    by its owner and repository (``CIRCLE_PR_USERNAME``, ``CIRCLE_PR_REPONAME``)."""
    pull = (env.get("CIRCLE_PULL_REQUEST") or "").rstrip("/").rsplit("/", 1)[-1]
    tag, branch = env.get("CIRCLE_TAG"), env.get("CIRCLE_BRANCH")
    ref = (
        f"refs/pull/{pull}/head"
        if pull.isdigit()
        else f"refs/tags/{tag}"
        if tag
        else f"refs/heads/{branch}"
        if branch
        else None
    )
    owner, name = env.get("CIRCLE_PROJECT_USERNAME"), env.get("CIRCLE_PROJECT_REPONAME")
    fork_owner = env.get("CIRCLE_PR_USERNAME")
    return CiContext(
        provider="CIRCLECI",
        project=f"{owner}/{name}" if owner and name else None,
        run_id=env.get("CIRCLE_WORKFLOW_ID"),
        commit=env.get("CIRCLE_SHA1"),
        ref=ref,
        head_ref=branch if pull.isdigit() else None,
        event="pull_request" if pull.isdigit() else "push",
        job=env.get("CIRCLE_JOB"),
        sender={"login": env["CIRCLE_USERNAME"], "id": ""} if env.get("CIRCLE_USERNAME") else None,
        repository_root=env.get("CIRCLE_WORKING_DIRECTORY"),
        ci_url=env.get("CIRCLE_BUILD_URL") or None,
        shard=_shard(env.get("CIRCLE_NODE_INDEX"), env.get("CIRCLE_NODE_TOTAL"), 0),
        fork=f"{fork_owner}/{env.get('CIRCLE_PR_REPONAME') or name}" if fork_owner and fork_owner != owner else None,
    )


def _resolved(commit: str | None) -> str | None:
    """A commit the CI may name symbolically (Buildkite's ``HEAD`` for a build started by hand) as
    its SHA, read from the checkout; None when git cannot tell."""
    from codspeed_rules.names import is_commit

    if not commit or is_commit(commit):
        return commit
    return _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")


def _local() -> CiContext:
    remote = _git("config", "--get", "remote.origin.url") or ""
    project = project_of_remote(remote) if remote else None
    # one git call for three answers: the top folder, the commit, the branch ("HEAD" when detached)
    answers = (_git("rev-parse", "--show-toplevel", "HEAD", "--symbolic-full-name", "HEAD") or "").splitlines()
    root, commit, ref = (answers + [None, None, None])[:3]
    return CiContext(
        provider="LOCAL",
        project=project,
        commit=commit,
        ref=ref if ref and ref.startswith("refs/") else None,
        repository_root=root,
    )
