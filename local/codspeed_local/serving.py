"""An HTTP server on a thread of its own, and its stop: the local stack's servers and the tests' fakes."""

import socket
import threading
from socketserver import BaseServer
from typing import TypeVar

Server = TypeVar("Server", bound=BaseServer)


def serve_in_thread(server: Server, name: str = "server") -> Server:
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def stop_serving(server: BaseServer) -> None:
    """Stops the server's loop and closes its socket. The loop notices a stop at its next poll,
    every half second (socketserver's default; polling more often costs an idle stack a core's
    2 %), or at once when a connection wakes it: the suite's 117 stops waited 44 s in all. So
    one is made until the loop has ended (it then ends without serving it)."""
    stopping = threading.Thread(target=server.shutdown, daemon=True)
    stopping.start()
    while stopping.is_alive():
        _wake(server)
        stopping.join(0.01)
    server.server_close()


def _wake(server: BaseServer) -> None:
    host, port = server.server_address[:2]
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    try:
        socket.create_connection((host, port), timeout=0.1).close()
    except OSError:  # the loop ended between the check and the connection
        pass
