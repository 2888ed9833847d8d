"""GitHub's word on a pull request, an Actions run and a merge commit, asked with the stack's token:
what a tokenless request claims (a fork's pull request, its commit, its workflow run) is checked
here. An answer not of the form GitHub documents is ``OddAnswer``: never read as a refusal."""

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import requests

from ..domain.fork_pull_request import MergeCommit, PullRequest, WorkflowRun
from .github_api import GitHubApi

T = TypeVar("T")


class OddAnswer(Exception):
    """GitHub answered, but not in the form its API documents."""


class GitHubPulls(GitHubApi):
    def pull(self, project: str, number: int) -> PullRequest | None:
        """Pull request ``number`` of ``project``; None when GitHub has none."""
        return self._read(
            f"/repos/{project}/pulls/{number}",
            lambda found: PullRequest(
                state=_text(found["state"]),
                head_sha=_text(found["head"]["sha"]),
                head_repository=_maybe_text((found["head"].get("repo") or {}).get("full_name")),
                base_repository=_text(found["base"]["repo"]["full_name"]),
                base_ref=_text(found["base"]["ref"]),
                merge_commit_sha=_maybe_text(found.get("merge_commit_sha")),
            ),
        )

    def workflow_run(self, project: str, run_id: str) -> WorkflowRun | None:
        """Actions run ``run_id`` of ``project``; None when GitHub has none."""
        if not run_id.isdigit():
            return None  # GitHub's run ids are numbers: no request for another name
        return self._read(
            f"/repos/{project}/actions/runs/{run_id}",
            lambda found: WorkflowRun(
                head_sha=_text(found["head_sha"]),
                head_repository=_maybe_text((found.get("head_repository") or {}).get("full_name")),
                completed=_text(found["status"]) == "completed",
            ),
        )

    def merge_commit(self, project: str, commit: str, base_ref: str) -> MergeCommit | None:
        """Commit ``commit`` of ``project`` (a pull request's merge commit lives in the base repository)
        with its parents, and whether its first parent is on ``base_ref``; None when GitHub has no such
        commit. Two requests: the commit, then the base branch compared with its first parent."""
        parents = self._read(
            f"/repos/{project}/commits/{commit}",
            lambda found: tuple(_text(p["sha"]) for p in found["parents"]),
        )
        if parents is None:
            return None
        if len(parents) != 2:
            return MergeCommit(parents, first_parent_on_base=False)
        status = self._read(
            f"/repos/{project}/compare/{quote(base_ref, safe='')}...{parents[0]}",
            lambda found: _text(found["status"]),
        )
        # the first parent is on the base branch when the branch's tip is it or is ahead of it
        return MergeCommit(parents, first_parent_on_base=status in ("identical", "behind"))

    def _read(self, path: str, read: Callable[[Any], T]) -> T | None:
        try:
            found = self.call("GET", path)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            # GitHub: 404 for what it has not; 422 "No commit found for SHA" for a commit it does not know
            if status == 404 or (status == 422 and "/commits/" in path):
                return None
            raise
        try:
            return read(found)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise OddAnswer(f"GET {path} answered in a form GitHub's API does not document ({exc!r})") from exc


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a string where it holds {type(value).__name__}")
    return value


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)
