"""GitHub's REST API, as the aggregator calls it: one session with the stack's token."""

from typing import Any

import requests


class GitHubApi:
    def __init__(self, api_url: str, token: str | None, timeout: float = 10) -> None:
        self.api_url = api_url.rstrip("/")
        self.http = requests.Session()
        self.http.headers.update(
            {
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            }
        )
        self.timeout = timeout

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, params: dict[str, Any] | None = None
    ) -> Any:  # GitHub's JSON: an object, or a list (commits)
        answer = self.http.request(method, f"{self.api_url}{path}", json=body, params=params, timeout=self.timeout)
        answer.raise_for_status()
        return answer.json() if answer.content else {}
