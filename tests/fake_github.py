"""A fake of GitHub's REST API on loopback, keeping what it is sent: commit statuses, and issue
comments (a pull request's), checked as GitHub documents them; and a repository's history
(``commits``: each commit's parents, the first first; ``pulls``: each pull request's base branch
and head; ``forks``: the repository a pull request comes from, when not the project) as its pulls,
compare and commits endpoints answer it; and its Actions runs (``workflow_runs``: a run's head commit
and the repository it ran from), as ``GET /repos/{owner}/{repo}/actions/runs/{id}`` answers them."""

import json
import re
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from codspeed_local.serving import serve_in_thread, stop_serving

BODY_LIMIT = 65_536  # GitHub refuses a longer comment body: 422 "body is too long (maximum is 65536 characters)"
_CREATE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_EDIT = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")
_PULL = re.compile(r"^/repos/([^/]+/[^/]+)/pulls/(\d+)$")
_COMPARE = re.compile(r"^/repos/([^/]+/[^/]+)/compare/(.+)\.\.\.([0-9a-f]{40})$")  # BASE...HEAD
_COMMITS = re.compile(r"^/repos/([^/]+/[^/]+)/commits$")
_COMMIT = re.compile(r"^/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})$")
_RUN = re.compile(r"^/repos/([^/]+/[^/]+)/actions/runs/(\d+)$")
_JOBS = re.compile(r"^/repos/([^/]+/[^/]+)/actions/runs/(\d+)/attempts/(\d+)/jobs$")


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads and answers JSON, and logs nothing."""

    def _answer(self, status: int, body, headers: dict | None = None) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["content-length"])))

    def log_message(self, *args) -> None:
        pass


class Loopback:
    """A fake host's server on loopback, serving ``Handler`` on a thread."""

    def serve(self, handler: type) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        serve_in_thread(self.server)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        stop_serving(self.server)


class FakeGitHub(Loopback):
    def __init__(self) -> None:
        self.statuses: list[dict] = []
        self.comments: dict[int, dict] = {}  # id -> project, number, body, edits
        self.requests: list[tuple[str, str]] = []  # (method, path) of every comment call
        self.fail_with: int | None = None
        self.fail_next: list[tuple[int, dict, dict]] = []  # (status, body, headers) of the next comment calls, in order
        self.commits: dict[str, list[str]] = {}  # sha -> its parents, the first first
        self.branches: dict[str, str] = {}  # name -> its tip
        self.pulls: dict[int, tuple[str, str]] = {}  # number -> (base branch, head sha)
        self.forks: dict[int, str | None] = {}  # number -> the fork it comes from (None: a deleted fork)
        self.closed: set[int] = set()  # pull requests closed or merged
        # number -> GitHub's latest test merge commit (its merge_commit_sha), when computed
        self.merge_commits: dict[int, str] = {}
        self.workflow_runs: dict[str, tuple[str, str]] = {}  # Actions run id -> (head sha, repository it ran from)
        self.completed_runs: set[str] = set()  # Actions runs whose every job ended (status "completed")
        self.run_attempts: dict[str, int] = {}  # Actions run id -> its latest attempt (run_attempt), 1 when unsaid
        # (Actions run id, attempt) -> its jobs: (name, runner_name, status), as the attempt's jobs list them
        self.jobs: dict[tuple[str, int], list[tuple[str, str | None, str]]] = {}
        self.posted = 0  # comments ever created
        self.reads: list[str] = []  # the path of every GET
        self.lock = threading.Lock()
        self.serve(type("Handler", (_GitHubHandler,), {"fake": self}))

    def commit_on(self, branch: str, sha: str, *parents: str) -> str:
        """A commit of the fake repository, ``branch``'s tip now."""
        self.commits[sha] = list(parents or ([self.branches[branch]] if branch in self.branches else []))
        self.branches[branch] = sha
        return sha

    def history(self, sha: str) -> list[str]:
        """``sha`` and every commit before it, the nearest first (as GitHub lists them)."""
        found, todo = [], [sha]
        while todo:
            at = todo.pop(0)
            if at not in found:
                found.append(at)
                todo.extend(self.commits.get(at, []))
        return found

    def commit(self, sha: str) -> dict:
        return {"sha": sha, "parents": [{"sha": p} for p in self.commits[sha]]}


def _repository(full_name: str) -> dict:
    """A repository as GitHub's payloads hold it: its id (stable, what the runner compares), name and owner."""
    return {"id": zlib.crc32(full_name.encode()), "full_name": full_name, "owner": {"login": full_name.split("/")[0]}}


class _GitHubHandler(JsonHandler):
    """GitHub's REST API, the calls the aggregator makes, answered from ``fake``'s state."""

    fake: FakeGitHub

    def do_POST(self) -> None:
        fake, body = self.fake, self._body()
        if self.path.split("/")[-2] == "statuses":
            fake.statuses.append({"path": self.path, "authorization": self.headers.get("authorization"), **body})
            return self._answer(fake.fail_with or 201, {"state": body.get("state")})
        created = _CREATE.match(self.path)
        with fake.lock:
            fake.requests.append(("POST", self.path))
            refused = self._refused(created, body)
            if refused:
                return self._answer(*refused)
            comment_id = 1000 + fake.posted  # GitHub never gives an id twice, a deleted comment's included
            fake.posted += 1
            fake.comments[comment_id] = {
                "project": created.group(1),
                "number": int(created.group(2)),
                "body": body["body"],
                "edits": 0,
            }
        self._answer(201, {"id": comment_id, "body": body["body"]})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self.fake.reads.append(url.path)
        if self.fake.fail_with:
            return self._answer(self.fake.fail_with, {"message": "Resource not accessible by integration"})
        if not (self.headers.get("authorization") or "").startswith("Bearer "):
            return self._answer(401, {"message": "Requires authentication"})
        for route, answer in (
            (_PULL, self._pull),
            (_RUN, self._workflow_run),
            (_JOBS, self._attempt_jobs),
            (_COMPARE, self._compare),
            (_COMMITS, self._commits),
            (_COMMIT, self._commit),
        ):
            if found := route.match(url.path):
                return self._answer(*(answer(found, url.query) or (404, {"message": "Not Found"})))
        self._answer(404, {"message": "Not Found"})

    def _pull(self, pull: re.Match, _query: str) -> tuple[int, dict] | None:
        fake, number, project = self.fake, int(pull.group(2)), pull.group(1)
        if number not in fake.pulls:
            return None
        base, head = fake.pulls[number]
        origin = fake.forks.get(number, project)
        return 200, {
            "number": number,
            "state": "closed" if number in fake.closed else "open",
            "merge_commit_sha": fake.merge_commits.get(number),
            "base": {"ref": base, "sha": fake.branches.get(base), "repo": _repository(project)},
            "head": {"ref": f"feature-{number}", "sha": head, "repo": _repository(origin) if origin else None},
        }

    def _workflow_run(self, run: re.Match, _query: str) -> tuple[int, dict] | None:
        if run.group(2) not in self.fake.workflow_runs:
            return None
        head, origin = self.fake.workflow_runs[run.group(2)]
        status = "completed" if run.group(2) in self.fake.completed_runs else "in_progress"
        return 200, {
            "id": int(run.group(2)),
            "head_sha": head,
            "head_repository": {"full_name": origin},
            "status": status,
            "run_attempt": self.fake.run_attempts.get(run.group(2), 1),
        }

    def _attempt_jobs(self, found: re.Match, query: str) -> tuple[int, dict] | None:
        """GitHub's "list jobs for a workflow run attempt", a page at a time (``per_page``, 100 at most)."""
        jobs = self.fake.jobs.get((found.group(2), int(found.group(3))))
        if jobs is None:
            return None
        asked = dict(parse_qsl(query))
        per_page, page = min(int(asked.get("per_page", 30)), 100), int(asked.get("page", 1))
        listed = jobs[(page - 1) * per_page : page * per_page]
        return 200, {
            "total_count": len(jobs),
            "jobs": [
                {"id": hash((name, index)) & 0xFFFFFF, "name": name, "runner_name": runner, "status": status}
                for index, (name, runner, status) in enumerate(listed)
            ],
        }

    def _compare(self, compare: re.Match, _query: str) -> tuple[int, dict] | None:
        fake = self.fake
        base = fake.branches.get(unquote(compare.group(2)), unquote(compare.group(2)))
        if base not in fake.commits or compare.group(3) not in fake.commits:
            return None
        ours, theirs = fake.history(base), fake.history(compare.group(3))
        found = next((c for c in theirs if c in ours), None)
        if found is None:  # GitHub: 404 "No common ancestor between BASE and HEAD"
            return None
        # as GitHub says where HEAD stands against BASE
        status = (
            "identical"
            if base == compare.group(3)
            else "behind"
            if compare.group(3) in ours
            else "ahead"
            if base in theirs
            else "diverged"
        )
        return 200, {"merge_base_commit": fake.commit(found), "status": status}

    def _commit(self, commit: re.Match, _query: str) -> tuple[int, dict] | None:
        if commit.group(2) not in self.fake.commits:  # as GitHub answers a commit it does not know
            return 422, {"message": f"No commit found for SHA: {commit.group(2)}", "status": "422"}
        return 200, self.fake.commit(commit.group(2))

    def _commits(self, _path: re.Match, query: str) -> tuple[int, dict | list]:
        asked = parse_qs(query)
        per_page = int(asked.get("per_page", ["30"])[0])
        if per_page > 100:
            return 422, {"message": "per_page is at most 100"}
        return 200, [self.fake.commit(c) for c in self.fake.history(asked["sha"][0])[:per_page]]

    def do_PATCH(self) -> None:
        fake, body, edited = self.fake, self._body(), _EDIT.match(self.path)
        with fake.lock:
            fake.requests.append(("PATCH", self.path))
            refused = self._refused(edited, body)
            if refused:
                return self._answer(*refused)
            comment = fake.comments.get(int(edited.group(2)))
            if comment is None or comment["project"] != edited.group(1):
                return self._answer(404, {"message": "Not Found"})
            comment["body"], comment["edits"] = body["body"], comment["edits"] + 1
        self._answer(200, {"id": int(edited.group(2)), "body": body["body"]})

    def _refused(self, path, body: dict) -> tuple | None:
        fake = self.fake
        if fake.fail_next:
            return fake.fail_next.pop(0)
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
            return 422, {
                "message": "Validation Failed",
                "errors": [{"message": "body is too long (maximum is 65536 characters)"}],
            }
        return None
