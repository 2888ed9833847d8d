"""moto's server in this process, each API call served under one lock.

moto's DynamoDB is not thread-safe: conditional writes and transactions race between
threads. Serializing each call keeps every call atomic, as it is in DynamoDB, while
callers still interleave between calls.
"""

import threading
from collections.abc import Callable

from werkzeug.serving import BaseWSGIServer, make_server


def start_moto(host: str = "127.0.0.1", port: int = 0, refused: Callable[[str], str | None] | None = None) -> BaseWSGIServer:
    """``refused(path)``: why a presigned request to ``path`` is refused (AccessDenied), or None:
    moto checks no presigned signature, so the local stack says which presigner had no right."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

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
