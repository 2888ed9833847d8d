"""Feed SQS messages to a handler the way Lambda's event source mapping does: in batches,
deleting what succeeded and leaving failed items to come back after the visibility timeout."""

import threading
import time

from .lambda_context import LocalContext
from .limits import LAMBDA_SYNC_PAYLOAD, payload_bytes


def sqs_event(messages: list[dict], queue_arn: str) -> dict:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {k: str(v) for k, v in m.get("Attributes", {}).items()},
                "messageAttributes": {  # as Lambda hands them over
                    name: {
                        "stringValue": a.get("StringValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": a["DataType"],
                    }
                    for name, a in m.get("MessageAttributes", {}).items()
                },
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


class QueuePoller:
    def __init__(
        self,
        sqs,
        queue_url: str,
        handler,
        function_name: str,
        batch_size: int = 10,
        wake: threading.Event | None = None,
    ) -> None:
        self.sqs, self.queue_url, self.handler = sqs, queue_url, handler
        self.context = LocalContext(function_name)
        self.batch_size = batch_size
        self.arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self._stop = threading.Event()
        self._wake = wake or threading.Event()  # set when a queue may hold something new (moto_server.woken_by)
        # a message is handed over this long after it was sent at the soonest: AWS's timing (an S3 event
        # reaches its queue seconds after the PUT), for a test to set; 0 here, where the stack is quick
        self.min_age = 0.0
        self._thread = threading.Thread(target=self._run, name=function_name, daemon=True)

    def start(self) -> "QueuePoller":
        self._thread.start()
        return self

    def stop(self, wait: float = 10) -> None:
        """Polls no more; waits up to ``wait`` seconds for the invocation under way (0: none)."""
        self._stop.set()
        self._wake.set()
        if wait:
            self._thread.join(timeout=wait)

    def poll_once(self, wait_seconds: int = 0) -> int:
        messages = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        messages = self._aged(messages)
        if not messages:
            return 0
        event = self._within_payload(messages)
        try:
            result = self.handler(event, self.context) or {}
        except Exception:  # a crashed invocation: every message comes back, as in Lambda
            return len(messages)
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )
        return len(messages)

    def _within_payload(self, messages: list[dict]) -> dict:
        """The event of as many of ``messages`` as Lambda's 6 MB take (the rest go back at once; ``messages``
        keeps those sent)."""
        event = sqs_event(messages, self.arn)
        while len(messages) > 1 and payload_bytes(event) > LAMBDA_SYNC_PAYLOAD:
            left = messages.pop()
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=left["ReceiptHandle"], VisibilityTimeout=0
            )
            event = sqs_event(messages, self.arn)
        return event

    def _aged(self, messages: list[dict]) -> list[dict]:
        """The messages at least ``min_age`` old; the others go back until they are."""
        now, aged = time.time(), []
        for message in messages:
            left = self.min_age - (now - int(message["Attributes"]["SentTimestamp"]) / 1000)
            if left <= 0:
                aged.append(message)
            else:
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=int(left) + 1
                )
        return aged

    def _run(self) -> None:
        # Short polls: moto serves a long poll by sleeping inside the call, which would hold
        # the local stack's one lock (see moto_server) for the whole wait. An idle poller waits to
        # be woken by a request that may have queued something, and polls at least every second
        # (a message whose visibility timeout ran out comes back on its own).
        while not self._stop.is_set():
            self._wake.clear()  # before the poll: a wakeup during it is not lost
            try:
                if not self.poll_once():
                    self._wake.wait(1.0)
            except Exception:  # the stack is shutting down, or moto hiccupped: poll again
                self._stop.wait(0.5)
