"""moto's server in this process, each API call served under one lock.

moto's DynamoDB is not thread-safe: conditional writes and transactions race between
threads. Serializing each call keeps every call atomic, as it is in DynamoDB, while
callers still interleave between calls.
"""

import copy
import threading
from collections.abc import Callable

from werkzeug.serving import BaseWSGIServer, make_server


def start_moto(host: str = "127.0.0.1", port: int = 0, refused: Callable[[str], str | None] | None = None) -> BaseWSGIServer:
    """``refused(path)``: why a presigned request to ``path`` is refused (AccessDenied), or None:
    moto checks no presigned signature, so the local stack says which presigner had no right."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

    _back_up_each_table_once()
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ, start_response):
        if refused and "X-Amz-Signature=" in environ.get("QUERY_STRING", ""):
            why = refused(environ.get("PATH_INFO", ""))
            if why:
                start_response("403 Forbidden", [("Content-Type", "application/xml")])
                return [f"<Error><Code>AccessDenied</Code><Message>{why}</Message></Error>".encode()]
        with lock:
            return list(app(environ, start_response))

    class QuietHandler(MotoRequestHandler):
        def log_request(self, *args) -> None:
            pass

    server = make_server(host, port, serialized, threaded=True, request_handler=QuietHandler)
    threading.Thread(target=server.serve_forever, name="moto", daemon=True).start()
    return server


class _TablesCopiedOnce:
    """``copy`` as moto's DynamoDB sees it during one transaction: a table deep-copied once."""

    def __init__(self, table_type) -> None:
        self._table_type, self._copies = table_type, {}

    def deepcopy(self, value, memo=None):
        if not isinstance(value, self._table_type):
            return copy.deepcopy(value, memo)
        if id(value) not in self._copies:
            self._copies[id(value)] = copy.deepcopy(value, memo)
        return self._copies[id(value)]

    def __getattr__(self, name):
        return getattr(copy, name)


def _back_up_each_table_once() -> None:
    """moto backs a table up (a deep copy of all its items, to roll back) once per item of a
    transaction: a claim of 17 items copied the whole table 17 times, and the suite's table
    grows with every run. Once per table is the same rollback. (Calls are serialized: the
    module's ``copy`` is swapped for one call at a time.)"""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "copies_once", False):
        return
    original = backend.transact_write_items

    def transact_write_items(self, transact_items):
        models.copy = _TablesCopiedOnce(Table)
        try:
            return original(self, transact_items)
        finally:
            models.copy = copy

    transact_write_items.copies_once = True
    backend.transact_write_items = transact_write_items
