"""A stand-in upstream speaking CodSpeed's upload protocol; it keeps each upload in a folder,
and combines them into runs as CodSpeed does.

``POST /upload`` (metadata, ``Authorization: <token>``) answers an ``uploadUrl`` on this
server; ``PUT`` there stores the archive after checking its Content-MD5. Each upload is
a folder: ``metadata.json``, ``post-body.json`` (the POST's bytes), ``post-headers.json``, ``put-
headers.json``, and the archive:
``archive.tar.gz`` when it came with ``Content-Encoding: gzip``, else ``archive.tar``.

CodSpeed combines the uploads ("run parts") of one run by ``runPart.runId``; a ``runPartId``
"uniquely identifies a RunPart within a Run" (the runner's ``src/run_environment/interfaces.rs``),
so a part sent again replaces itself, and two parts holding one benchmark count it twice.
``combined`` and ``benchmarks_twice`` answer what CodSpeed would then hold.
"""

import base64
import hashlib
import json
import re
import tarfile
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .serving import serve_in_thread, stop_serving

ARCHIVES = ("archive.tar.gz", "archive.tar")


def archive_of(upload: Path) -> Path | None:
    """The archive an upload folder holds, or None before its PUT."""
    return next((upload / name for name in ARCHIVES if (upload / name).exists()), None)


CLIENT_REQUEST = b"desc: Trigger: Client Request: "
MAX_RESULTS = 16 << 20  # a results file larger than this is not an integration's


def benchmarks_in(archive: Path) -> set[str]:
    """The benchmarks an archive holds: each callgrind part's client request (read line by line:
    a .out can be gigabytes), and each entry of the integrations' ``results/<pid>.json`` (walltime
    holds only those)."""
    found = set()
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            if not member.isfile():
                continue
            if member.name.endswith(".out"):
                found.update(_client_requests(tar.extractfile(member)))
            elif re.search(r"results/[^/]+\.json$", member.name) and member.size <= MAX_RESULTS:
                found.update(_results_entries(tar.extractfile(member).read()))
    return found


def _client_requests(lines) -> list[str]:
    """The benchmarks a callgrind part names (its metadata's request aside)."""
    return [
        line[len(CLIENT_REQUEST) :].decode(errors="replace").strip()
        for line in lines
        if line.startswith(CLIENT_REQUEST) and not line.startswith(CLIENT_REQUEST + b"Metadata: ")
    ]


def _results_entries(content: bytes) -> list[str]:
    """The benchmarks an integration's results file lists (none where it is not one)."""
    try:
        entries = json.loads(content).get("benchmarks")
    except (ValueError, AttributeError):
        return []
    if not isinstance(entries, list):
        return []
    return [str(e.get("uri") or e.get("name")) for e in entries if isinstance(e, dict)]


class StubUpstream:
    def __init__(self, folder: Path, token: str | None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.project_tokens: dict[str, str] = {}  # owner/repo -> its own token (CodSpeed's are per repository)
        # a CI job's OIDC token, as CodSpeed takes one (audience codspeed.io): its repository, or it is refused
        self.oidc_repository: Callable[[str], str] | None = None
        self._held: dict[Path, set[str]] = {}  # an upload's benchmarks, read once (an archive never changes)
        self.failures: list[int] = []  # status codes to answer the next POSTs with (fault injection)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), type("Handler", (_UpstreamHandler,), {"stub": self}))
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StubUpstream":
        serve_in_thread(self.server, "upstream")
        return self

    def stop(self) -> None:
        stop_serving(self.server)

    def uploads(self, run_id: str | None = None, commit: str | None = None) -> list[Path]:
        """Folders of the uploads whose archive arrived (of one run, by its runPart, or of one
        commit), oldest first."""
        done = [p for p in self.folder.iterdir() if archive_of(p)]
        if run_id is not None:
            done = [
                p
                for p in done
                if (json.loads((p / "metadata.json").read_text()).get("runPart") or {}).get("runId") == run_id
            ]
        if commit is not None:
            done = [p for p in done if json.loads((p / "metadata.json").read_text()).get("commitHash") == commit]
        return sorted(done, key=lambda p: archive_of(p).stat().st_mtime_ns)

    def combined(self, project: str | None = None) -> dict[tuple[str, str], dict[str, Path]]:
        """The runs CodSpeed would hold (of one project, or all): (project, runPart.runId) ->
        runPartId -> its last upload. An upload with no runPart is a run of its own."""
        runs: dict[tuple[str, str], dict[str, Path]] = {}
        for upload in self.uploads():  # oldest first: the last one of a runPartId wins
            meta = json.loads((upload / "metadata.json").read_text())
            owner = f"{meta.get('owner')}/{meta.get('repository')}"
            if project is not None and owner != project:
                continue
            part = meta.get("runPart")
            run, part_id = (part["runId"], part["runPartId"]) if part else (upload.name, "")
            runs.setdefault((owner, run), {})[part_id] = upload
        return runs

    def benchmarks_twice(self, project: str | None = None) -> dict[str, list[str]]:
        """Every benchmark (of one executor) that stands in two parts of one run, with the parts'
        runPartIds: what CodSpeed would count twice. Empty when each stands once."""
        twice = {}
        for (owner, run), parts in self.combined(project).items():
            seen: dict[tuple[str, str], list[str]] = {}
            for part_id, upload in parts.items():
                executor = (json.loads((upload / "metadata.json").read_text()).get("runner") or {}).get(
                    "executor"
                ) or "valgrind"
                if upload not in self._held:
                    self._held[upload] = benchmarks_in(archive_of(upload))
                for benchmark in self._held[upload]:
                    seen.setdefault((executor, benchmark), []).append(part_id)
            twice.update(
                {f"{owner} run {run}: {executor} {b}": ids for (executor, b), ids in seen.items() if len(ids) > 1}
            )
        return twice

    def job_token_of(self, authorization: str | None, metadata: dict) -> bool:
        """Whether ``authorization`` is a valid OIDC token of the upload's repository."""
        if self.oidc_repository is None or not authorization or authorization.count(".") != 2:
            return False
        try:
            return self.oidc_repository(authorization) == f"{metadata.get('owner')}/{metadata.get('repository')}"
        except Exception:  # refused: expired, another issuer or audience, a bad signature
            return False


class _UpstreamHandler(BaseHTTPRequestHandler):
    """CodSpeed's upload API, as ``stub`` keeps it: POST the metadata, PUT the archive where it says."""

    stub: StubUpstream
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def _reply(self, status: int, body: dict) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def do_POST(self) -> None:
        body = self._body()
        with self.stub._lock:
            failure = self.stub.failures.pop(0) if self.stub.failures else None
        if failure:
            return self._reply(failure, {"error": f"injected failure {failure}"})
        if self.path != "/upload":
            return self._reply(404, {"error": "not found"})
        try:
            metadata = json.loads(body)
        except ValueError:
            return self._reply(400, {"error": "metadata is not JSON"})
        if refused := self._unauthorized(metadata):
            return self._reply(*refused)
        upload_id = uuid.uuid4().hex
        folder = self.stub.folder / upload_id
        folder.mkdir()
        (folder / "metadata.json").write_text(json.dumps(metadata, indent=2))
        (folder / "post-body.json").write_bytes(body)  # the bytes as they came: the runner's Run Hash is theirs
        (folder / "post-headers.json").write_text(json.dumps(dict(self.headers.items()), indent=2))
        host = self.headers.get("host") or f"{self.stub.server.server_address[0]}:{self.stub.server.server_address[1]}"
        self._reply(200, {"status": "success", "uploadUrl": f"http://{host}/archive/{upload_id}", "runId": upload_id})

    def _unauthorized(self, metadata: dict) -> tuple[int, dict] | None:
        """CodSpeed's rule: a tokenless upload carries no Authorization; any other, the project's
        token (or a CI job's OIDC token naming its repository)."""
        authorization = self.headers.get("authorization")
        if metadata.get("tokenless"):
            if authorization is not None:  # the runner sends one or the other, never both
                return 400, {"error": "a tokenless upload came with an Authorization header"}
            return None
        if self.stub.job_token_of(authorization, metadata):
            return None
        expected = self.stub.project_tokens.get(
            f"{metadata.get('owner')}/{metadata.get('repository')}", self.stub.token
        )
        if expected and authorization != expected:
            return 401, {"error": "Invalid token: check that owner and repository are correct"}
        return None

    def do_PUT(self) -> None:
        body = self._body()
        upload_id = self.path.removeprefix("/archive/")
        folder = self.stub.folder / upload_id
        if not self.path.startswith("/archive/") or not (folder / "metadata.json").exists():
            return self._reply(404, {"error": "no such upload"})
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        if self.headers.get("content-md5") != md5:
            return self._reply(400, {"error": "Content-MD5 does not match the body"})
        (folder / "put-headers.json").write_text(json.dumps(dict(self.headers.items()), indent=2))
        gzipped = self.headers.get("content-encoding") == "gzip"
        stored = folder / ARCHIVES[0 if gzipped else 1]
        partial = stored.with_name(f".{stored.name}.partial")
        partial.write_bytes(body)
        partial.replace(stored)  # whole or absent, as an object store shows it: never seen half-written
        self._reply(200, {"status": "stored"})

    def log_message(self, *args) -> None:
        pass
