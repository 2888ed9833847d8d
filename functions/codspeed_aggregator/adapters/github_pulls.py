"""GitHub's word on a pull request, an Actions run and a merge commit, asked with the stack's token:
what a tokenless request claims (a fork's pull request, its commit, its workflow run) is checked
here. An answer not of the form GitHub documents is ``OddAnswer``: never read as a refusal."""

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import requests

from ..domain.fork_pull_request import MergeCommit, PullRequest, WorkflowJob, WorkflowRun
from .github_api import GitHubApi

T = TypeVar("T")
JOBS_PAGE, JOB_PAGES = 100, 10  # GitHub lists 100 jobs a page at most; an attempt of more than 1000 is not read


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
                attempt=_maybe_attempt(found.get("run_attempt")),
            ),
        )

    def attempt_jobs(self, project: str, run_id: str, attempt: int) -> list[WorkflowJob] | None:
        """The jobs of attempt ``attempt`` of Actions run ``run_id``, every page; None when GitHub has no
        such attempt, or lists more jobs than are read (then nothing is decided from a part of them)."""
        if not run_id.isdigit():
            return None
        jobs: list[WorkflowJob] = []
        for page in range(1, JOB_PAGES + 1):
            listed = self._read(
                f"/repos/{project}/actions/runs/{run_id}/attempts/{attempt}/jobs",
                _jobs,
                params={"per_page": JOBS_PAGE, "page": page},
            )
            if listed is None:
                return None
            total, found = listed
            jobs += found
            if len(jobs) >= total or len(found) < JOBS_PAGE:
                return jobs
        return None

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

    def _read(self, path: str, read: Callable[[Any], T], params: dict[str, Any] | None = None) -> T | None:
        try:
            found = self.call("GET", path, params=params)
        except requests.JSONDecodeError as exc:  # a RequestException: it is no failure to reach GitHub
            raise OddAnswer(f"GET {path} answered a body that is not JSON ({exc})") from exc
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


def _jobs(found: Any) -> tuple[int, list[WorkflowJob]]:
    jobs = [
        WorkflowJob(_text(job["name"]), _maybe_text(job.get("runner_name")), _text(job["status"]) == "completed")
        for job in found["jobs"]
    ]
    total = found["total_count"]
    if not isinstance(total, int):
        raise TypeError(f"a count where it holds {total!r}")
    return total, jobs


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a string where it holds {type(value).__name__}")
    return value


def _maybe_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _maybe_attempt(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TypeError(f"an attempt where it holds {value!r}")
    return value
