"""Every kind of bad input is refused with a reason that names it, and the run is untouched."""

import json

import pytest
import requests

from tests.bad_inputs import CASES, Target


@pytest.fixture(scope="module")
def target(stack):
    from codspeed_aggregator.wiring import for_arrivals

    return Target(stack.api_url, stack.token, for_arrivals())


def test_there_are_at_least_thirty_kinds():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name, refuse", CASES, ids=[name for name, _ in CASES])
@pytest.mark.slow
def test_bad_input_is_refused_cleanly(target, name, refuse):
    refuse(target, name)


def _throttled(client, operation: str):
    """Every ``operation`` call of ``client`` answered as DynamoDB answers a throttled one, before it
    is sent: botocore's retry handler sees each answer, retries, and gives up."""
    from botocore.awsrequest import AWSResponse

    def hook(request, **kwargs):
        if request.headers.get("X-Amz-Target", b"").decode().endswith(f".{operation}"):
            body = json.dumps(
                {
                    "__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException",
                    "message": "Rate of requests exceeds the allowed throughput.",
                }
            ).encode()
            return AWSResponse(request.url, 400, {"x-amzn-ErrorType": "ThrottlingException"}, _Raw(body))
        return None

    client.meta.events.register("before-send.dynamodb", hook)
    return lambda: client.meta.events.unregister("before-send.dynamodb", hook)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs):
        yield self.body


@pytest.mark.slow
def test_a_write_throttled_past_botocores_retries_is_a_503_that_says_so_never_a_500(stack, project, run_id):
    from codspeed_aggregator.adapters import aws
    from codspeed_aggregator.wiring import API

    client = aws.client("dynamodb", API)
    undo = _throttled(client, "PutItem")
    try:
        answer = requests.post(
            f"{stack.api_url}/v1/runs/open",
            headers={"Authorization": stack.token},
            timeout=60,
            json={"project": project, "run_id": run_id, "total": 2, "commit": "a" * 40, "ref": "refs/heads/main"},
        )
    finally:
        undo()
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "5", answer.text
    assert answer.json() == {
        "error": "the aggregator's storage is busy (ThrottlingException on PutItem): send the "
        "request again in a few seconds"
    }
    again = requests.post(
        f"{stack.api_url}/v1/runs/open",
        headers={"Authorization": stack.token},
        timeout=60,
        json={"project": project, "run_id": run_id, "total": 2, "commit": "a" * 40, "ref": "refs/heads/main"},
    )
    assert again.status_code == 200, again.text
