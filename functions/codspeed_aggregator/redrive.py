"""``codspeed-aggregator redrive``: SQS moves the finalize messages that failed every retry (in
the dead-letter queue) back to the finalize queue, once the upstream is healthy again. SQS's own
message move task does it (StartMessageMoveTask): no message passes through this machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class Redriven:
    status: str  # the task's: RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED
    moved: int
    to_move: int
    failure: str | None = None


def redrive(
    sqs: SQSClient,
    dead_letter_url: str,
    queue_url: str,
    wait_seconds: float = 120,
    sleep: Callable[[float], None] = time.sleep,
) -> Redriven:
    """Start the move and follow it until it ends or ``wait_seconds`` pass (it goes on in SQS then)."""
    source, destination = (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for url in (dead_letter_url, queue_url)
    )
    sqs.start_message_move_task(SourceArn=source, DestinationArn=destination)
    deadline = time.monotonic() + wait_seconds
    while True:
        task = sqs.list_message_move_tasks(SourceArn=source, MaxResults=1)["Results"][0]  # the latest: this one
        if task["Status"] != "RUNNING" or time.monotonic() >= deadline:
            return Redriven(
                task["Status"],
                task.get("ApproximateNumberOfMessagesMoved", 0),
                task.get("ApproximateNumberOfMessagesToMove", 0),
                task.get("FailureReason"),
            )
        sleep(1)
