"""An HTTP server on a thread of its own, and its stop: the local stack's servers and the tests' fakes."""

import threading
from socketserver import BaseServer
from typing import TypeVar

Server = TypeVar("Server", bound=BaseServer)

# How long a stopping server takes at most to notice: socketserver's default (0.5 s) was paid by every
# test that stops one, 116 stops a suite; 20 wakeups a second of an idle server cost nothing measurable.
POLL_SECONDS = 0.05


def serve_in_thread(server: Server, name: str = "server") -> Server:
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, name=name)
    serving.daemon = True
    serving.start()
    return server


def stop_serving(server: BaseServer) -> None:
    server.shutdown()
    server.server_close()
