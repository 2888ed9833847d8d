"""The local stack's servers on their threads: served, then stopped and closed."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from codspeed_local.serving import serve_in_thread, stop_serving


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_a_server_serves_on_its_named_thread_and_once_stopped_neither_answers_nor_leaves_a_thread():
    server = serve_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Ok), "fake-host")
    port = server.server_address[1]
    assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 204
    assert [t.daemon for t in threading.enumerate() if t.name == "fake-host"] == [True]

    stop_serving(server)

    assert not [t for t in threading.enumerate() if t.name == "fake-host" and t.is_alive()]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_stop_wakes_a_loop_that_would_poll_once_an_hour():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 3600}, daemon=True).start()
    stopping = threading.Thread(target=stop_serving, args=(server,), daemon=True)
    stopping.start()
    stopping.join(timeout=30)  # an hour without the wake-up
    assert not stopping.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(server.server_address[:2], timeout=5)
