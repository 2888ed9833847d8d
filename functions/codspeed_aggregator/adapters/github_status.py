"""GitHub's commit statuses API: one POST per report that changes what the status says."""

import requests

from ..domain.notification import CONTEXT


class GitHubStatuses:
    def __init__(self, api_url: str, token: str, timeout: float = 10) -> None:
        self.api_url = api_url.rstrip("/")
        self.http = requests.Session()
        self.http.headers.update({
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        })
        self.timeout = timeout

    def post(self, project: str, commit: str, state: str, description: str, target_url: str | None = None) -> None:
        """``target_url``: where the status links (the run's page)."""
        body = {"state": state, "description": description, "context": CONTEXT}
        if target_url:
            body["target_url"] = target_url
        answer = self.http.post(f"{self.api_url}/repos/{project}/statuses/{commit}", json=body, timeout=self.timeout)
        answer.raise_for_status()
