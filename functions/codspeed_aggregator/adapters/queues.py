"""The SQS queues the functions send to: the finalize queue (a message asks the finalizer to
finish one run, or one upload of it) and the arrivals queue (S3's events of bundles)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codspeed_wire.queue import FinalizeMessage

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from mypy_boto3_sqs import SQSClient


class Queue:
    def __init__(self, url: str, client: SQSClient, dead_letter_url: str | None = None) -> None:
        self.url = url
        self.sqs = client
        self.dead_letter_url = dead_letter_url

    def send(self, body: str, deferrals: int = 0) -> None:
        """A message; ``deferrals``: how many times its event was sent again for lack of time."""
        if deferrals:
            counted: dict[str, Any] = {"deferrals": {"DataType": "Number", "StringValue": str(deferrals)}}
            self.sqs.send_message(QueueUrl=self.url, MessageBody=body, MessageAttributes=counted)
        else:
            self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def dead_letter(self, body: str, why: str) -> None:
        """Put a message in the queue's dead-letter queue (its alarm fires), saying why."""
        if self.dead_letter_url is None:
            raise ValueError(f"queue {self.url} was given no dead-letter queue")
        self.sqs.send_message(
            QueueUrl=self.dead_letter_url,
            MessageBody=body,
            MessageAttributes={"why": {"DataType": "String", "StringValue": why}},
        )

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        """Bring a message that failed back after ``seconds`` rather than the queue's visibility
        timeout (which is long enough for a whole merge, 90 minutes)."""
        self.sqs.change_message_visibility(QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds)


class FinalizeQueue(Queue):
    def request(
        self, project: str, run_id: str, reason: str, part: int | None = None, shard: str | None = None
    ) -> None:
        message = FinalizeMessage(project=project, run_id=run_id, reason=reason, part=part, shard=shard)
        self.send(message.model_dump_json(exclude_none=True))

    def request_in(self, project: str, run_id: str, reason: str, seconds: int) -> None:
        """Ask to finalize the run again in ``seconds`` (SQS's DelaySeconds: 900 at most)."""
        message = FinalizeMessage(project=project, run_id=run_id, reason=reason)
        self.sqs.send_message(
            QueueUrl=self.url, MessageBody=message.model_dump_json(exclude_none=True), DelaySeconds=min(seconds, 900)
        )
