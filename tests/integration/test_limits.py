"""AWS's hard limits as the local stack holds handlers to them: an SQS batch handed to a function
stays under Lambda's 6 MB synchronous payload, and SQS refuses a message over 1 MiB."""

import pytest
from botocore.exceptions import ClientError

from codspeed_aggregator.adapters.aws import client
from codspeed_local.limits import LAMBDA_SYNC_PAYLOAD, payload_bytes
from codspeed_local.pollers import QueuePoller


def test_a_batch_of_large_messages_is_cut_to_what_one_invocation_takes_and_none_is_lost(stack):
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="limits-large", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    bodies = {f"{i:02d}" + "x" * 1_000_000 for i in range(8)}  # 8 MB of messages, each under SQS's 1 MiB
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    events, handled = [], []

    def handler(event, context):
        events.append(payload_bytes(event))
        handled.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    poller = QueuePoller(sqs, url, handler, "limits")
    for _ in range(20):
        if set(handled) == bodies:
            break
        poller.poll_once()
    assert set(handled) == bodies and len(handled) == len(bodies)
    assert max(events) <= LAMBDA_SYNC_PAYLOAD and len(events) >= 2


def test_sqs_refuses_a_message_over_1_mib_and_keeps_nothing(stack):
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="limits-refused")["QueueUrl"]
    with pytest.raises(ClientError, match="Message must be shorter than 1048576 bytes"):
        sqs.send_message(QueueUrl=url, MessageBody="x" * (1024 * 1024 + 1))
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
