"""The local gateway: API Gateway v2 events over real HTTP, one event at a time per handler."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from codspeed_local.gateway import start_gateway
from codspeed_local.serving import stop_serving


def test_events_reach_the_handler_one_at_a_time_as_in_a_lambda_instance():
    in_flight, most, lock = [0], [0], threading.Lock()

    def handler(event, context):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.02)  # powertools' resolver keeps the current event on the app: overlap would mix requests
        with lock:
            in_flight[0] -= 1
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": event["body"]}

    server = start_gateway(handler)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/echo?x=1"
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: requests.post(url, json={"i": i}, timeout=10).json(), range(24)))
    finally:
        stop_serving(server)
    assert answers == [{"i": i} for i in range(24)]  # each request got its own answer
    assert most[0] == 1


def test_the_event_is_an_http_api_v2_event():
    seen = []
    server = start_gateway(lambda event, context: seen.append(event) or {"statusCode": 204, "body": ""})
    try:
        requests.get(
            f"http://127.0.0.1:{server.server_address[1]}/v1/runs/a/b/c?format=markdown",
            headers={"Authorization": "t"},
            timeout=10,
        )
    finally:
        stop_serving(server)
    event = seen[0]
    assert (event["version"], event["rawPath"], event["queryStringParameters"]) == (
        "2.0",
        "/v1/runs/a/b/c",
        {"format": "markdown"},
    )
    assert event["requestContext"]["http"]["method"] == "GET" and event["headers"]["authorization"] == "t"


def test_a_response_over_lambdas_6_mb_payload_is_the_500_api_gateway_answers():
    from codspeed_local.limits import LAMBDA_SYNC_PAYLOAD

    sizes = {"under": LAMBDA_SYNC_PAYLOAD - 1024, "over": LAMBDA_SYNC_PAYLOAD + 1}
    server = start_gateway(
        lambda event, context: {
            "statusCode": 200,
            "headers": {"content-type": "text/plain"},
            "body": "x" * sizes[event["rawPath"].strip("/")],
        }
    )
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        under, over = requests.get(f"{base}/under", timeout=30), requests.get(f"{base}/over", timeout=30)
    finally:
        stop_serving(server)
    assert under.status_code == 200 and len(under.content) == sizes["under"]
    assert over.status_code == 500 and over.json() == {"message": "Internal Server Error"}


def test_a_request_whose_event_is_over_6_mb_never_reaches_the_handler():
    seen = []
    server = start_gateway(lambda event, context: seen.append(1) or {"statusCode": 200, "body": ""})
    try:
        answer = requests.post(
            f"http://127.0.0.1:{server.server_address[1]}/v1/uploads",
            data=b"\x00" * (5 << 20),
            headers={"content-type": "application/octet-stream"},
            timeout=30,
        )  # base64: over 6 MB
    finally:
        stop_serving(server)
    assert answer.status_code == 413 and answer.json() == {"message": "Request Entity Too Large"} and not seen
