"""AWS's hard limits a handler can hit that moto does not enforce, as AWS documents them today
(Lambda's quotas; the Invoke API reference): the local gateway and pollers hold handlers to them.
SQS's message size (1 MiB, the queues' default MaximumMessageSize) moto enforces itself; an
asynchronous invocation's 1 MB (the sweeper's schedule) no event of ours comes near."""

import json

LAMBDA_SYNC_PAYLOAD = 6 * 1024 * 1024  # a synchronous invocation's event, and its response (API Gateway, SQS)
HTTP_API_PAYLOAD = 10 * 1024 * 1024  # a request body API Gateway's HTTP API takes


def payload_bytes(document) -> int:
    """The size of an event or a response as Lambda serializes it."""
    return len(json.dumps(document, separators=(",", ":")).encode())
