"""GitLab's notes API: the sticky comment on a merge request, posted once, then edited in place."""

from urllib.parse import quote

import requests


class GitLabNotes:
    host = "GitLab"
    thread = "merge request"  # what the note is on, as the host says it
    needs = "the api scope, as a member who may comment on merge requests"  # what a refused token lacks
    body_limit = 1_000_000  # GitLab's: a note's body is limited to 1,000,000 characters

    def __init__(self, api_url: str, token: str | None, timeout: float = 10) -> None:
        self.api_url = api_url.rstrip("/")  # https://gitlab.com/api/v4
        self.http = requests.Session()
        if token:  # none: no header, and GitLab answers 401
            self.http.headers["PRIVATE-TOKEN"] = token
        self.timeout = timeout

    def _notes(self, project: str, number: int) -> str:
        """A merge request's notes; the project by its path, URL-encoded whole (``group%2Fsub%2Frepo``)."""
        return f"{self.api_url}/projects/{quote(project, safe='')}/merge_requests/{number}/notes"

    def create(self, project: str, number: int, body: str) -> int:
        """Post a note on merge request ``number`` (its IID); answers its id."""
        answer = self.http.post(self._notes(project, number), json={"body": body}, timeout=self.timeout)
        answer.raise_for_status()
        return int(answer.json()["id"])

    def edit(self, project: str, number: int, note_id: int, body: str) -> None:
        answer = self.http.put(f"{self._notes(project, number)}/{note_id}", json={"body": body}, timeout=self.timeout)
        answer.raise_for_status()
