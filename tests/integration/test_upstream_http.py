"""The forwarder's HTTP client against misbehaving upstreams on loopback: every request is
bounded in total time, not only per read."""

import gzip
import io
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codspeed_aggregator.adapters.upstream_http import UpstreamClient, UpstreamError
from codspeed_local.serving import serve_in_thread, stop_serving

GRANT = {"status": "success", "uploadUrl": "http://127.0.0.1:9/archive/x", "runId": "r1"}


def _serve(handler_class) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    return serve_in_thread(server)


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
    stop_serving(server)


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
        stop_serving(server)


class _Redirecting(BaseHTTPRequestHandler):
    """Answers 307 to ``target`` (as S3 does for a bucket new outside us-east-1), reading nothing."""

    target = ""

    def _redirect(self) -> None:
        self.send_response(307)
        self.send_header("Location", self.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = _redirect

    def log_message(self, *args) -> None:
        pass


class _Receiving(BaseHTTPRequestHandler):
    """Keeps what it is sent: method, path, headers, body."""

    received = []

    def _keep(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.received.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        answer = json.dumps(GRANT).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_POST = do_PUT = _keep

    def log_message(self, *args) -> None:
        pass


def test_a_307_is_followed_with_the_whole_body_and_no_token_goes_to_another_host():
    import base64
    import hashlib

    receiver = _serve(_Receiving)
    _Redirecting.target = f"http://localhost:{receiver.server_address[1]}"  # another host name, on loopback
    redirecting = _serve(_Redirecting)
    try:
        client = UpstreamClient(f"http://127.0.0.1:{redirecting.server_address[1]}/upload", "secret-token", timeout=5)
        accepted = client.announce({"version": 10})
        archive = b"\x1f\x8b" + bytes(range(256)) * 400
        md5 = base64.b64encode(hashlib.md5(archive).digest()).decode()
        client.put(
            f"http://127.0.0.1:{redirecting.server_address[1]}/archive/x", io.BytesIO(archive), len(archive), md5
        )
    finally:
        stop_serving(redirecting)
        stop_serving(receiver)
    (post, post_path, post_headers, _), (put, put_path, put_headers, body) = _Receiving.received[-2:]
    assert accepted.runId == "r1" and (post, post_path, put, put_path) == ("POST", "/upload", "PUT", "/archive/x")
    assert "authorization" not in post_headers  # the token was for 127.0.0.1, not for localhost
    assert body == archive and put_headers["content-md5"] == md5


def test_a_redirect_to_plain_http_elsewhere_or_past_three_hops_is_refused():
    from codspeed_aggregator.adapters.upstream_http import UpstreamRefused

    _Redirecting.target = "http://upstream.example"
    redirecting = _serve(_Redirecting)
    try:
        client = UpstreamClient(f"http://127.0.0.1:{redirecting.server_address[1]}/upload", "t", timeout=5, attempts=1)
        with pytest.raises(
            UpstreamRefused, match=r"redirected to http://upstream.example/upload: a redirect is followed to https only"
        ):
            client.announce({"version": 10})
        _Redirecting.target = f"http://127.0.0.1:{redirecting.server_address[1]}"  # to itself, for ever
        with pytest.raises(UpstreamError, match="redirected more than 3 times"):
            client.announce({"version": 10})
    finally:
        stop_serving(redirecting)


def _powertools_fails(code: str):
    """What powertools' SSM provider raises when GetParameter fails: its GetParameterError, raised
    while handling botocore's error (parameters/base.py wraps every failure alike)."""
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
    from botocore.exceptions import ClientError

    try:
        raise ClientError({"Error": {"Code": code, "Message": f"{code} (injected)"}}, "GetParameter")
    except ClientError as exc:
        raise GetParameterError(str(exc)) from exc


def test_each_project_is_forwarded_with_its_own_token_and_a_tokenless_run_with_none(tmp_path):
    from codspeed_aggregator.adapters.upstream_tokens import UpstreamTokens
    from codspeed_local.upstream_stub import StubUpstream

    stub = StubUpstream(tmp_path, token="stack-token").start()
    stub.project_tokens["acme/own"] = "own-token"
    reads = []

    def read(parameter):
        reads.append(parameter)
        if parameter != "/tokens/acme/own":
            _powertools_fails("ParameterNotFound")
        return "own-token"

    now = [0.0]
    client = UpstreamClient(
        f"{stub.url}/upload",
        "stack-token",
        timeout=5,
        attempts=1,
        tokens=UpstreamTokens("/tokens/", "stack-token", read, clock=lambda: now[0]),
    )
    try:
        meta = {"version": 10, "owner": "acme", "repository": "own", "tokenless": False}
        for repository in ("own", "other", "other"):
            client.announce({**meta, "repository": repository})
        client.announce({**meta, "repository": "fork", "tokenless": True})
        headers = [
            json.loads((u / "post-headers.json").read_text())
            for u in sorted(tmp_path.iterdir(), key=lambda p: (p / "metadata.json").stat().st_mtime_ns)
        ]
        assert [h.get("Authorization") for h in headers] == ["own-token", "stack-token", "stack-token", None]
        assert {h["User-Agent"] for h in headers} == {"codspeed-shard-aggregator/1.0.0"}
        assert reads == ["/tokens/acme/own", "/tokens/acme/other"]  # a project with none is not asked again at once
        now[0] += 301
        client.announce({**meta, "repository": "other"})
        assert reads[-1] == "/tokens/acme/other"
        stub.project_tokens["acme/other"] = "other-token"  # the stand-in refuses another project's token, as CodSpeed
        with pytest.raises(UpstreamError, match="answered 401: .*check that owner and repository are correct"):
            client.announce({**meta, "repository": "other"})
    finally:
        stub.stop()


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "AccessDeniedException", "KMSAccessDeniedException", "InternalServerError"]
)
def test_an_ssm_fault_is_never_taken_for_a_project_without_a_token_of_its_own(tmp_path, code):
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    from codspeed_aggregator.adapters.upstream_tokens import UpstreamTokens
    from codspeed_local.upstream_stub import StubUpstream

    stub = StubUpstream(tmp_path, token="stack-token").start()
    reads = []

    def read(parameter):
        reads.append(parameter)
        _powertools_fails(code)

    client = UpstreamClient(
        f"{stub.url}/upload",
        "stack-token",
        timeout=5,
        attempts=1,
        tokens=UpstreamTokens("/tokens/", "stack-token", read),
    )
    try:
        meta = {"version": 10, "owner": "acme", "repository": "own", "tokenless": False}
        for _ in range(2):  # not remembered as "none of its own": asked again, and failing again
            with pytest.raises(GetParameterError, match=code):
                client.announce(meta)
        assert reads == ["/tokens/acme/own"] * 2
        assert list(tmp_path.iterdir()) == []  # nothing went upstream, under any token
    finally:
        stub.stop()


class _Busy(BaseHTTPRequestHandler):
    """Answers its first POST 429 with ``Retry-After: 9`` (as CodSpeed's API may), then the grant."""

    answered = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).answered += 1
        if type(self).answered == 1:
            self.send_response(429)
            self.send_header("Retry-After", "9")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(GRANT).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_429_is_tried_again_after_what_its_retry_after_says():
    """The upstream ignored Retry-After on a 429 (a backoff of its own: 1 s), where the client honoured it."""
    server, waited = _serve(_Busy), []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/upload"
        client = UpstreamClient(url, "t", timeout=5, attempts=3, sleep=waited.append)
        assert client.announce({"version": 10}).runId == "r1"
    finally:
        stop_serving(server)
    assert waited == [9.0]
