"""GitHub's commit statuses API: one POST per report that changes what the status says."""

from ..domain.notification import CONTEXT
from .github_api import GitHubApi


class GitHubStatuses(GitHubApi):
    def post(self, project: str, commit: str, state: str, description: str, target_url: str | None = None) -> None:
        """``target_url``: where the status links (the run's page)."""
        body = {"state": state, "description": description, "context": CONTEXT}
        if target_url:
            body["target_url"] = target_url
        self.call("POST", f"/repos/{project}/statuses/{commit}", body)

    def parents(self, project: str, commit: str) -> list[str]:
        """A commit's parents, the first first (a pull request's merge commit: its base, then its head)."""
        found = self.call("GET", f"/repos/{project}/commits/{commit}")
        return [str(parent["sha"]) for parent in found["parents"]]
