"""A local HTTP API: each request becomes an API Gateway HTTP API (v2) event for the api handler."""

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .lambda_context import LocalContext
from .limits import HTTP_API_PAYLOAD, LAMBDA_SYNC_PAYLOAD, payload_bytes
from .serving import serve_in_thread

MAX_BODY = HTTP_API_PAYLOAD
SERVER_ERROR = {
    "statusCode": 500,
    "headers": {"content-type": "application/json"},
    "body": json.dumps({"message": "Internal Server Error"}),
}  # what API Gateway answers when the function fails
TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded")


def _utf8(body: bytes) -> bool:
    """Whether API Gateway would hand the body over as text: a body that is not UTF-8 goes base64-encoded."""
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def http_api_event(
    method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str = "127.0.0.1"
) -> dict:
    url = urlsplit(target)
    text = not body or (any(t in headers.get("content-type", "application/json") for t in TEXT_TYPES) and _utf8(body))
    query = {k: ",".join(v) for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": url.path,
        "rawQueryString": url.query,
        "headers": headers,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": headers.get("host", "localhost"),
            "http": {
                "method": method,
                "path": url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": body.decode() if text else base64.b64encode(body).decode(),
        "isBase64Encoded": not text,
    }


def _invoked(handler: Callable[[dict, object], dict], event: dict, instance: threading.Lock) -> dict:
    """The handler's answer as API Gateway passes it on: a 500 for a handler that failed, or for an
    answer over Lambda's payload limit."""
    try:
        with instance:
            result = handler(event, LocalContext("codspeed-api"))
    except Exception:
        logging.getLogger(__name__).exception("api handler failed")
        return SERVER_ERROR
    if payload_bytes(result) > LAMBDA_SYNC_PAYLOAD:
        logging.getLogger(__name__).error(
            "api response of %d bytes is over Lambda's %d-byte payload limit: API Gateway answers 500",
            payload_bytes(result),
            LAMBDA_SYNC_PAYLOAD,
        )
        return SERVER_ERROR
    return result


def start_gateway(
    handler: Callable[[dict, object], dict],
    host: str = "127.0.0.1",
    port: int = 0,
    log: Callable[[str], None] | None = None,
) -> ThreadingHTTPServer:
    # A Lambda instance handles one event at a time, and the handler relies on it: powertools'
    # resolver keeps the current event on the app. Connections are served concurrently, events not.
    instance = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                self._answer(
                    413, {"content-type": "application/json"}, json.dumps({"error": "request body over 10 MB"}).encode()
                )
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            event = http_api_event(self.command, self.path, headers, body, self.client_address[0])
            if payload_bytes(event) > LAMBDA_SYNC_PAYLOAD:  # Lambda refuses the invocation: API Gateway says 413
                self._answer(
                    413,
                    {"content-type": "application/json"},
                    json.dumps({"message": "Request Entity Too Large"}).encode(),
                )
                return
            result = _invoked(handler, event, instance)
            payload = result.get("body") or ""
            raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
            self._answer(result.get("statusCode", 200), result.get("headers") or {}, raw)
            if log:
                log(f"{self.command} {urlsplit(self.path).path} {result.get('statusCode', 200)}")

        def _answer(self, status: int, headers: dict, raw: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

        def log_message(self, *args) -> None:  # quiet: the stack prints what matters
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    serve_in_thread(server, "gateway")
    return server
