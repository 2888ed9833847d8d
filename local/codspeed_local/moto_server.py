"""moto's server in this process, each API call served under one lock.

moto's DynamoDB is not thread-safe: conditional writes and transactions race between
threads. Serializing each call keeps every call atomic, as it is in DynamoDB, while
callers still interleave between calls.
"""

import logging
import os
import threading
from collections.abc import Callable

from werkzeug.serving import BaseWSGIServer, make_server

from .moto_fidelity import as_aws
from .moto_speedups import speed_up_moto
from .serving import serve_in_thread

SPEEDUPS = "CODSPEED_LOCAL_MOTO_SPEEDUPS"  # "0": moto's own code, none of moto_speedups' shortcuts
MOTO_PATCHED = "5.2.6"  # the moto moto_speedups was written against: pyproject's local extra and constraints.txt


# each queue's pollers' events, by queue name: the process's, as moto's backends are (shared by every
# server in it; a stack's queues have names of their own)
_WAITING: dict[str, list[threading.Event]] = {}


def woken_by(queue_url: str) -> threading.Event:
    """An event set whenever the queue may hold a message it did not: one sent to it (S3's event
    notifications among them) or made visible again. An idle poller waits for that instead of polling
    moto 20 times a second (each poll costs the stack's one lock), and a write elsewhere (a report, a
    page, another bucket's object, another queue's message) wakes none: two empty polls after each of
    the suite's S3 writes were a quarter of its AWS calls."""
    _wake_on_queueing()
    event = threading.Event()
    _WAITING.setdefault(queue_url.rsplit("/", 1)[-1], []).append(event)
    return event


def _wake_on_queueing() -> None:
    """moto's SQS wakes the pollers of each queue that may hold a message it did not (its batch calls and
    S3's notifications go through the same two methods). Each call goes to moto as it came: on a moto
    without these methods, the pollers poll once a second all the same."""
    from moto.sqs.models import SQSBackend

    for name in ("send_message", "change_message_visibility"):
        own = getattr(SQSBackend, name, None)
        if own is None or getattr(own, "wakes", False):
            continue

        def queueing(self, *args, _own=own, **kwargs):
            try:
                return _own(self, *args, **kwargs)
            finally:
                for event in _WAITING.get(kwargs.get("queue_name", args[0] if args else None), ()):
                    event.set()

        queueing.wakes = True
        setattr(SQSBackend, name, queueing)


def shortcuts_apply(installed: str | None = None) -> bool:
    """Whether moto_speedups' shortcuts may be swapped in: not when turned off (``SPEEDUPS``), nor on a moto
    other than the one they were written for, whose internals they cannot vouch for (said in a sentence:
    the stack serves all the same, as moto ships, slower)."""
    if os.environ.get(SPEEDUPS, "1") == "0":
        return False
    from importlib.metadata import version

    installed = installed or version("moto")
    if installed != MOTO_PATCHED:
        logging.getLogger(__name__).warning(
            "moto %s is not the %s the local stack's shortcuts were written for: it serves without them, slower",
            installed,
            MOTO_PATCHED,
        )
        return False
    return True


def start_moto(
    host: str = "127.0.0.1",
    port: int = 0,
    refused: Callable[[str], str | None] | None = None,
) -> BaseWSGIServer:
    """``refused(path)``: why a presigned request to ``path`` is refused (AccessDenied), or None:
    moto checks no presigned signature, so the local stack says which presigner had no right."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    as_aws()
    if shortcuts_apply():
        speed_up_moto()
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        if refused and "X-Amz-Signature=" in environ.get("QUERY_STRING", ""):
            why = refused(environ.get("PATH_INFO", ""))
            if why:
                start_response("403 Forbidden", [("Content-Type", "application/xml")])
                return [f"<Error><Code>AccessDenied</Code><Message>{why}</Message></Error>".encode()]
        body = KnownLengthBody.around(environ)
        with lock:
            answer = list(app(environ, start_response))
        if body is not None and body.drained():
            environ[_KEEP_ALIVE] = True
        return answer

    class QuietHandler(MotoRequestHandler):
        disable_nagle_algorithm = True  # an answer's headers and body are two writes: none waits for an ACK

        def log_request(self, *args) -> None:
            pass

        def run_wsgi(self) -> None:
            _answer(self)

    server = make_server(host, port, serialized, threaded=True, request_handler=QuietHandler)
    serve_in_thread(server, "moto")
    return server


_KEEP_ALIVE = "codspeed_local.keep_alive"


def _send_headers(handler, headers: list[tuple[str, str]]) -> str | None:
    """The application's headers but those of the connection; answers the Content-Length it said."""
    length = None
    for name, value in headers:
        if name.lower() == "content-length":
            length = value
        elif name.lower() not in ("connection", "transfer-encoding"):
            handler.send_header(name, value)
    return length


def _answer(handler) -> None:
    """werkzeug's answer to a request, but for the connection: werkzeug closes every one, lest a
    body left unread be taken for the next request (then reads what the socket holds, the next
    request's bytes with it). Here a body read to its end (``KnownLengthBody``) leaves the connection open
    for the client's next call: a new connection, and a new thread here, for each call cost a
    tenth of the suite's time. The application's answer is whole (``serialized`` lists it)."""
    if handler.headers.get("Expect", "").lower().strip(" \t") == "100-continue":
        handler.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    handler.environ = environ = handler.make_environ()
    started: list = []

    def start_response(status, headers, exc_info=None):
        started[:] = [status, headers]
        return lambda data: None

    try:
        body = b"".join(handler.server.app(environ, start_response))
    except Exception:  # moto answers its own errors: this one is the stack's, as werkzeug would say
        logging.getLogger(__name__).exception("moto's server failed a request")
        started[:], body = ["500 Internal Server Error", [("Content-Type", "text/plain")]], b"internal error"
    status, headers = started
    code, _, reason = status.partition(" ")
    handler.send_response(int(code), reason)
    length = _send_headers(handler, headers)
    silent = environ["REQUEST_METHOD"] == "HEAD" or int(code) in (204, 304) or int(code) < 200
    handler.send_header("Content-Length", str(length if silent and length is not None else len(body)))
    if not environ.get(_KEEP_ALIVE):
        handler.send_header("Connection", "close")
    handler.end_headers()
    if not silent:
        handler.wfile.write(body)


class KnownLengthBody:
    """A request's body of a known length, as moto reads it; what moto leaves unread is read
    after it (``drained``), so that the connection can serve the next request."""

    def __init__(self, stream, length: int) -> None:
        self._stream, self._left = stream, length

    @classmethod
    def around(cls, environ: dict) -> "KnownLengthBody | None":
        """None for a body of unknown length (chunked): its connection is closed after it."""
        if environ.get("HTTP_TRANSFER_ENCODING") or environ.get("wsgi.input_terminated"):
            return None
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        body = cls(environ["wsgi.input"], length)
        environ["wsgi.input"] = body
        return body

    def read(self, size: int = -1) -> bytes:
        return self._take(self._stream.read, size)

    def readline(self, size: int = -1) -> bytes:
        return self._take(self._stream.readline, size)

    def _take(self, reading, size: int | None) -> bytes:
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = reading(size) if size else b""
        self._left -= len(data)
        return data

    def drained(self) -> bool:
        while self._left and self.read(min(self._left, 1 << 16)):
            pass
        return self._left == 0
