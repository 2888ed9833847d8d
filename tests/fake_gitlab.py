"""A fake of GitLab's notes API on loopback (``/api/v4``), keeping the merge-request notes it is
sent, checked as GitLab documents them: the token in ``PRIVATE-TOKEN``, the project by its
URL-encoded path (a raw slash in it is another route: 404), a body of at most 1,000,000 characters."""

import re
import threading

from tests.fake_github import JsonHandler, Loopback

BODY_LIMIT = 1_000_000
_NOTES = re.compile(r"^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes(?:/(\d+))?$")


class FakeGitLab(Loopback):
    def __init__(self, token: str = "gl-token") -> None:
        self.notes: dict[int, dict] = {}  # id -> project (as encoded in the path), merge request, body, edits
        self.requests: list[tuple[str, str]] = []  # (method, path) of every call
        self.fail_with: int | None = None
        self.token, self.lock = token, threading.Lock()
        self.serve(type("Handler", (_GitLabHandler,), {"fake": self}))

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v4"


class _GitLabHandler(JsonHandler):
    """GitLab's notes API, answered from ``fake``'s state."""

    fake: FakeGitLab

    def do_POST(self) -> None:
        self._note(create=True)

    def do_PUT(self) -> None:
        self._note(create=False)

    def _note(self, create: bool) -> None:
        fake, body, route = self.fake, self._body(), _NOTES.match(self.path)
        with fake.lock:
            fake.requests.append((self.command, self.path))
            refused = self._refused(route, create, body)
            if refused:
                return self._answer(*refused)
            project, iid = route.group(1), int(route.group(2))
            if create:
                note_id = 500 + len(fake.notes)
                fake.notes[note_id] = {"project": project, "merge_request": iid, "body": body["body"], "edits": 0}
                return self._answer(201, {"id": note_id, "body": body["body"], "noteable_iid": iid})
            note = fake.notes.get(int(route.group(3)))
            if note is None or (note["project"], note["merge_request"]) != (project, iid):
                return self._answer(404, {"message": "404 Note Not Found"})
            note["body"], note["edits"] = body["body"], note["edits"] + 1
            self._answer(200, {"id": int(route.group(3)), "body": body["body"], "noteable_iid": iid})

    def _refused(self, route: re.Match | None, create: bool, body: dict) -> tuple[int, dict] | None:
        if self.fake.fail_with:
            return self.fake.fail_with, {"message": "403 Forbidden"}
        if self.headers.get("private-token") != self.fake.token:
            return 401, {"message": "401 Unauthorized"}
        if route is None or create == bool(route.group(3)):
            return 404, {"error": "404 Not Found"}
        if not isinstance(body.get("body"), str) or not body["body"]:
            return 400, {"error": "body is missing"}
        if len(body["body"]) > BODY_LIMIT:
            return 400, {"message": {"note": ["is too long (maximum is 1000000 characters)"]}}
        return None
