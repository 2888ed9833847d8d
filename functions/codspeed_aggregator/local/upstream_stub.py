"""A stand-in upstream speaking CodSpeed's upload protocol; it keeps each upload in a folder.

``POST /upload`` (metadata, ``Authorization: <token>``) answers an ``uploadUrl`` on this
server; ``PUT`` there stores the archive after checking its Content-MD5. Each upload is
a folder: ``metadata.json``, ``post-headers.json``, ``put-headers.json``, and the archive:
``archive.tar.gz`` when it came with ``Content-Encoding: gzip``, else ``archive.tar``.
"""

import base64
import hashlib
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


ARCHIVES = ("archive.tar.gz", "archive.tar")


def archive_of(upload: Path) -> Path | None:
    """The archive an upload folder holds, or None before its PUT."""
    return next((upload / name for name in ARCHIVES if (upload / name).exists()), None)


class StubUpstream:
    def __init__(self, folder: Path, token: str | None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.failures: list[int] = []  # status codes to answer the next POSTs with (fault injection)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), self._handler_class())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "StubUpstream":
        threading.Thread(target=self.server.serve_forever, name="upstream", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def uploads(self, run_id: str | None = None, commit: str | None = None) -> list[Path]:
        """Folders of the uploads whose archive arrived (of one run, by its runPart, or of one
        commit), oldest first."""
        done = [p for p in self.folder.iterdir() if archive_of(p)]
        if run_id is not None:
            done = [p for p in done if (json.loads((p / "metadata.json").read_text()).get("runPart") or {}).get("runId") == run_id]
        if commit is not None:
            done = [p for p in done if json.loads((p / "metadata.json").read_text()).get("commitHash") == commit]
        return sorted(done, key=lambda p: archive_of(p).stat().st_mtime_ns)

    def _handler_class(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
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
                with stub._lock:
                    failure = stub.failures.pop(0) if stub.failures else None
                if failure:
                    return self._reply(failure, {"error": f"injected failure {failure}"})
                if self.path != "/upload":
                    return self._reply(404, {"error": "not found"})
                if stub.token and self.headers.get("authorization") != stub.token:
                    return self._reply(401, {"error": "Invalid token"})
                try:
                    metadata = json.loads(body)
                except ValueError:
                    return self._reply(400, {"error": "metadata is not JSON"})
                upload_id = uuid.uuid4().hex
                folder = stub.folder / upload_id
                folder.mkdir()
                (folder / "metadata.json").write_text(json.dumps(metadata, indent=2))
                (folder / "post-headers.json").write_text(json.dumps(dict(self.headers.items()), indent=2))
                host = self.headers.get("host") or f"{stub.server.server_address[0]}:{stub.server.server_address[1]}"
                self._reply(200, {"status": "success", "uploadUrl": f"http://{host}/archive/{upload_id}", "runId": upload_id})

            def do_PUT(self) -> None:
                body = self._body()
                upload_id = self.path.removeprefix("/archive/")
                folder = stub.folder / upload_id
                if not self.path.startswith("/archive/") or not (folder / "metadata.json").exists():
                    return self._reply(404, {"error": "no such upload"})
                md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
                if self.headers.get("content-md5") != md5:
                    return self._reply(400, {"error": "Content-MD5 does not match the body"})
                (folder / "put-headers.json").write_text(json.dumps(dict(self.headers.items()), indent=2))
                gzipped = self.headers.get("content-encoding") == "gzip"
                (folder / ARCHIVES[0 if gzipped else 1]).write_bytes(body)
                self._reply(200, {"status": "stored"})

            def log_message(self, *args) -> None:
                pass

        return Handler
