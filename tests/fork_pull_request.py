"""A pull request from a fork, as the API's own handler meets it: GitHub's stand-in bears out its claim
(tests/integration/conftest.py's ``github`` and ``fork``), and requests go through the handler without a token."""

import json
from unittest import mock

from codspeed_aggregator import wiring
from codspeed_aggregator.handlers import api as api_handler
from codspeed_local.gateway import http_api_event
from codspeed_local.lambda_context import LocalContext
from tests.factories import bundle, upload_request

HEAD, FORK, NUMBER = "c" * 40, "someone/widgets", 8
BASE, MERGE = "b" * 40, "e" * 40  # main's tip, and GitHub's test merge commit of HEAD into it
PULL = f"refs/pull/{NUMBER}/merge"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def call(agg, method: str, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    headers = {"content-type": "application/json", **({"authorization": token} if token else {})}
    event = http_api_event(method, path, headers, json.dumps(body).encode() if body is not None else b"")
    with mock.patch.object(wiring, "for_api", lambda: agg):
        answer = api_handler.handler(event, LocalContext("ApiFunction"))
    return answer["statusCode"], json.loads(answer.get("body") or "{}")


def upload(project: str, run_id: str, shard: str = "1", *, size: int | None = None, **meta) -> tuple[dict, bytes]:
    data = bundle(5000 + int(shard))
    meta = {"ref": PULL, "event": "pull_request", "tokenless": True, "commit": MERGE, **meta}
    request = upload_request(project, run_id, shard, data, total=2, **meta)
    if size is not None:
        request["size"] = size
    return request, data
