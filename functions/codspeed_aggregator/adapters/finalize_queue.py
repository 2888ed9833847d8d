"""The finalize queue: a message asks the finalizer to finish one run, or one upload of it."""

from codspeed_wire.queue import FinalizeMessage


class FinalizeQueue:
    def __init__(self, url: str, client) -> None:
        self.url = url
        self.sqs = client

    def request(self, project: str, run_id: str, reason: str, part: int | None = None) -> None:
        message = FinalizeMessage(project=project, run_id=run_id, reason=reason, part=part)
        self.sqs.send_message(QueueUrl=self.url, MessageBody=message.model_dump_json(exclude_none=True))

    def retry_in(self, receipt_handle: str, seconds: int) -> None:
        """Bring a failed message back after ``seconds`` rather than the queue's visibility
        timeout (which is long enough for a whole merge, 90 minutes)."""
        self.sqs.change_message_visibility(QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds)
