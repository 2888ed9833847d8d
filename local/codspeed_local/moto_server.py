"""moto's server in this process, each API call served under one lock.

moto's DynamoDB is not thread-safe: conditional writes and transactions race between
threads. Serializing each call keeps every call atomic, as it is in DynamoDB, while
callers still interleave between calls.
"""

import copy
import json
import logging
import threading
from collections.abc import Callable

from werkzeug.serving import BaseWSGIServer, make_server

from .serving import serve_in_thread

# The requests after which a queue may hold a message it did not: S3's writes (its event
# notifications go to SQS within the request) and SQS's own sends and visibility changes.
_QUEUEING = {
    "AmazonSQS.SendMessage",
    "AmazonSQS.SendMessageBatch",
    "AmazonSQS.ChangeMessageVisibility",
    "AmazonSQS.ChangeMessageVisibilityBatch",
}


class Wakeups:
    """Tells the pollers that a queue may have something new, so an idle poller waits for that
    instead of polling moto 20 times a second (each poll costs the stack's one lock)."""

    def __init__(self) -> None:
        self._events: list[threading.Event] = []

    def register(self) -> threading.Event:
        event = threading.Event()
        self._events.append(event)
        return event

    def notify(self, environ: dict) -> None:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target in _QUEUEING or (target is None and environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE")):
            for event in self._events:
                event.set()


def start_moto(
    host: str = "127.0.0.1",
    port: int = 0,
    refused: Callable[[str], str | None] | None = None,
    wakeups: Wakeups | None = None,
) -> BaseWSGIServer:
    """``refused(path)``: why a presigned request to ``path`` is refused (AccessDenied), or None:
    moto checks no presigned signature, so the local stack says which presigner had no right.
    ``wakeups``: told after each request that may have queued a message."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    _dynamodb_item_by_item()
    _dynamodb_answers_as_json()
    _s3_versions_under_prefix()
    _list_moto_modules_once()
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
        if wakeups is not None:
            wakeups.notify(environ)
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
    length = None
    for name, value in headers:
        if name.lower() == "content-length":
            length = value
        elif name.lower() not in ("connection", "transfer-encoding"):
            handler.send_header(name, value)
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


def _list_moto_modules_once() -> None:
    """moto's dispatcher lists its own package's folders on disk at every request to tell a
    service from a host name; the pollers' short polls made that a tenth of the stack's time."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "listed_once", False):
        return
    modules = tuple(backends.list_of_moto_modules())

    def listed() -> tuple[str, ...]:
        return modules

    listed.listed_once = True
    backends.list_of_moto_modules = listed


class _NoTableBackup:
    """``copy`` as moto's DynamoDB sees it during one transaction: a table is not copied (its
    "backup" is the live table, so its rollback is a no-op); the items the transaction touches
    are kept and put back instead (``_undo_touched``)."""

    def __init__(self, table_type) -> None:
        self._table_type = table_type

    def deepcopy(self, value, memo=None):
        return value if isinstance(value, self._table_type) else copy.deepcopy(value, memo)

    def __getattr__(self, name):
        return getattr(copy, name)


def _touched(backend, transact_items) -> list[tuple[object, object, object, object]]:
    """(table, hash key, range key, the item as it is now or None) of each item a transaction names."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    touched = []
    for entry in transact_items:
        for op in entry.values():
            table = backend.tables.get(op.get("TableName"))
            key = op.get("Key") or op.get("Item")
            if table is None or not key or table.hash_key_attr not in key:
                continue
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = (
                DynamoType(key[table.range_key_attr]) if table.has_range_key and table.range_key_attr in key else None
            )
            if table.has_range_key and range_value is None:
                continue
            current = table.get_item(hash_value, range_value)
            touched.append((table, hash_value, range_value, copy.deepcopy(current)))
    return touched


def _undo_touched(touched) -> None:
    for table, hash_value, range_value, original in reversed(touched):
        if range_value is None:
            if original is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = original
        elif original is None:
            table.items[hash_value].pop(range_value, None)
        else:
            table.items[hash_value][range_value] = original


def _dynamodb_item_by_item() -> None:
    """moto backs a table up before a transaction (a deep copy of all its items, to roll back),
    and queries a table by walking every item: both grow with the table, and the suite's table
    grows with every run (a session's transactions spent most of their time copying). The same
    rollback keeps only the items the transaction names, and a query of a table's own key reads
    that key's items: the same answers. (Calls are serialized: the module's ``copy`` and a
    table's ``all_items`` are swapped for one call at a time.)"""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "item_by_item", False):
        return
    original = backend.transact_write_items

    def transact_write_items(self, transact_items):
        touched = _touched(self, transact_items) if len(transact_items) <= 100 else []
        models.copy = _NoTableBackup(Table)
        try:
            return original(self, transact_items)
        except Exception:
            _undo_touched(touched)
            raise
        finally:
            models.copy = copy

    transact_write_items.item_by_item = True
    backend.transact_write_items = transact_write_items

    query = Table.query

    def query_by_key(self, hash_key, *args, **kwargs):
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name is not None or not self.has_range_key or hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        self.all_items = lambda: list(self.items.get(hash_key, {}).values())
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query_by_key


def _s3_versions_under_prefix() -> None:
    """moto lists a bucket's object versions by deep-copying every version of every key in the
    bucket, data included, before it looks at the prefix: a tenth of the suite's time went there
    (``tests.factories.footprint`` lists a run's versions after every refusal). The same listing
    copies only the keys under the prefix. (Calls are serialized: a bucket's keys are swapped for
    one call at a time.)"""
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore

    if getattr(S3Backend.list_object_versions, "under_prefix", False):
        return
    original = S3Backend.list_object_versions

    def list_object_versions(self, bucket_name, *args, **kwargs):
        prefix = args[3] if len(args) > 3 else kwargs.get("prefix") or ""
        bucket = self.get_bucket(bucket_name)
        every = bucket.keys
        under = _VersionedKeyStore()
        for key, versions in every.iterlists():
            if key.startswith(prefix):
                under.setlist(key, versions)
        bucket.keys = under
        try:
            return original(self, bucket_name, *args, **kwargs)
        finally:
            bucket.keys = every

    list_object_versions.under_prefix = True
    S3Backend.list_object_versions = list_object_versions


def plain_json(answer) -> str | None:
    """The answer as JSON when it holds only strings, numbers, booleans, lists and string-keyed
    objects of them, nothing null (then ``json.dumps`` writes it as moto's serializer would);
    None otherwise."""
    return json.dumps(answer) if _plain(answer) else None


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (str, int, float, bool))


def _dynamodb_answers_as_json() -> None:
    """moto serializes each DynamoDB answer by walking the operation's botocore shapes, trying
    several spellings of every attribute's name: three quarters of a Query's time on its server.
    An answer that is plain JSON (items, keys, counts: no bytes, dates or nulls, which keep
    moto's own serializer) is the same document written with ``json.dumps``; botocore reads
    both alike (``tests/integration/test_moto_server.py`` compares them on every answer)."""
    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult.execute_result, "as_json", False):
        return
    serialize = DynamoResult.execute_result

    def execute_result(self, context):
        body = plain_json(self.result)
        if body is None:
            return serialize(self, context)
        return 200, {"Content-Type": f"application/x-amz-json-{context.service_model.metadata['jsonVersion']}"}, body

    execute_result.as_json = True
    execute_result.moto_serializer = serialize
    DynamoResult.execute_result = execute_result
