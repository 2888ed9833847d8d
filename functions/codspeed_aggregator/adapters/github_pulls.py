"""GitHub's word on a pull request and on an Actions run, asked with the stack's token: what a
tokenless request claims (a fork's pull request, its head, its workflow run) is checked here."""

from typing import Any

import requests

from ..domain.fork_pull_request import PullRequest, WorkflowRun
from .github_api import GitHubApi


class GitHubPulls(GitHubApi):
    def pull(self, project: str, number: int) -> PullRequest | None:
        """Pull request ``number`` of ``project``; None when GitHub has none."""
        found = self._get(f"/repos/{project}/pulls/{number}")
        if found is None:
            return None
        return PullRequest(
            state=found["state"],
            head_sha=found["head"]["sha"],
            head_repository=(found["head"].get("repo") or {}).get("full_name"),
            base_repository=found["base"]["repo"]["full_name"],
        )

    def workflow_run(self, project: str, run_id: str) -> WorkflowRun | None:
        """Actions run ``run_id`` of ``project``; None when GitHub has none."""
        if not run_id.isdigit():
            return None  # GitHub's run ids are numbers: no request for another name
        found = self._get(f"/repos/{project}/actions/runs/{run_id}")
        if found is None:
            return None
        return WorkflowRun(
            head_sha=found["head_sha"], head_repository=(found.get("head_repository") or {}).get("full_name")
        )

    def _get(self, path: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call("GET", path)
            return found
        except requests.HTTPError as exc:
            if exc.response is not None and exc.response.status_code == 404:
                return None
            raise
