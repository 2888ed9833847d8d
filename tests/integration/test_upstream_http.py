"""The forwarder's HTTP client against misbehaving upstreams on loopback: every request is
bounded in total time, not only per read."""

import gzip
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codspeed_aggregator.adapters.upstream_http import UpstreamClient, UpstreamError

GRANT = {"status": "success", "uploadUrl": "http://127.0.0.1:9/archive/x", "runId": "r1"}


def _serve(handler_class) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Trickling(BaseHTTPRequestHandler):
    """Answers 200 with a body it sends one byte every 0.1 s: each read is quick, the whole is not."""

    def _trickle(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps(GRANT).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    do_POST = do_PUT = _trickle

    def log_message(self, *args) -> None:
        pass


class _Gzipped(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = gzip.compress(json.dumps(GRANT).encode())
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def trickling():
    server = _serve(_Trickling)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_an_upstream_trickling_its_answer_is_cut_off_at_the_timeout_and_retried(trickling):
    client = UpstreamClient(f"{trickling}/upload", "t", timeout=1, attempts=2, sleep=lambda s: None)
    started = time.monotonic()
    with pytest.raises(UpstreamError, match=r"TooSlow: the answer took longer than 1 s \(after 2 tries\)"):
        client.announce({"version": 10})
    assert time.monotonic() - started < 4  # two tries of about 1 s, not the 7 s the trickle would take


def test_a_put_is_bounded_by_its_size_too(trickling):
    client = UpstreamClient(f"{trickling}/upload", "t", timeout=1, attempts=1, sleep=lambda s: None)
    started = time.monotonic()
    with pytest.raises(UpstreamError, match="TooSlow"):
        client.put(f"{trickling}/archive/x", io.BytesIO(b"x" * 1024), 1024, "md5")
    assert time.monotonic() - started < 3


def test_a_gzip_encoded_answer_is_read_as_json():
    server = _serve(_Gzipped)
    try:
        client = UpstreamClient(f"http://127.0.0.1:{server.server_address[1]}/upload", "t", timeout=5, attempts=1)
        assert client.announce({"version": 10}).runId == "r1"
    finally:
        server.shutdown()
