"""A fake of GitHub's REST API on loopback, keeping what it is sent: commit statuses, and issue
comments (a pull request's), checked as GitHub documents them."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY_LIMIT = 65_536  # GitHub refuses a longer comment body: 422 "body is too long (maximum is 65536 characters)"
_CREATE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_EDIT = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")


class FakeGitHub:
    def __init__(self) -> None:
        self.statuses: list[dict] = []
        self.comments: dict[int, dict] = {}  # id -> project, number, body, edits
        self.requests: list[tuple[str, str]] = []  # (method, path) of every comment call
        self.fail_with: int | None = None
        fake, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers["content-length"])))

            def do_POST(self) -> None:
                body = self._body()
                if self.path.split("/")[-2] == "statuses":
                    fake.statuses.append({"path": self.path, "authorization": self.headers.get("authorization"), **body})
                    return self._answer(fake.fail_with or 201, {"state": body.get("state")})
                created = _CREATE.match(self.path)
                with lock:
                    fake.requests.append(("POST", self.path))
                    refused = self._refused(created, body)
                    if refused:
                        return self._answer(*refused)
                    comment_id = 1000 + len(fake.comments)
                    fake.comments[comment_id] = {"project": created.group(1), "number": int(created.group(2)),
                                                 "body": body["body"], "edits": 0}
                self._answer(201, {"id": comment_id, "body": body["body"]})

            def do_PATCH(self) -> None:
                body, edited = self._body(), _EDIT.match(self.path)
                with lock:
                    fake.requests.append(("PATCH", self.path))
                    refused = self._refused(edited, body)
                    if refused:
                        return self._answer(*refused)
                    comment = fake.comments.get(int(edited.group(2)))
                    if comment is None or comment["project"] != edited.group(1):
                        return self._answer(404, {"message": "Not Found"})
                    comment["body"], comment["edits"] = body["body"], comment["edits"] + 1
                self._answer(200, {"id": int(edited.group(2)), "body": body["body"]})

            def _refused(self, path, body: dict) -> tuple[int, dict] | None:
                if fake.fail_with:
                    return fake.fail_with, {"message": "Resource not accessible by integration"}
                if path is None:
                    return 404, {"message": "Not Found"}
                if not (self.headers.get("authorization") or "").startswith("Bearer "):
                    return 401, {"message": "Requires authentication"}
                if self.headers.get("accept") != "application/vnd.github+json":
                    return 415, {"message": "Unsupported media type"}
                if not isinstance(body.get("body"), str) or not body["body"]:
                    return 422, {"message": "Validation Failed", "errors": [{"field": "body", "code": "missing_field"}]}
                if len(body["body"]) > BODY_LIMIT:
                    return 422, {"message": "Validation Failed",
                                 "errors": [{"message": "body is too long (maximum is 65536 characters)"}]}
                return None

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
