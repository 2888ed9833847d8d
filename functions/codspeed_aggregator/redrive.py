"""``codspeed-aggregator redrive``: send finalize messages that failed every retry (in the
dead-letter queue) back to the finalize queue, once the upstream is healthy again."""


def redrive(sqs, dead_letter_url: str, queue_url: str, limit: int = 1000) -> int:
    """Move up to ``limit`` messages; answers how many moved. Each is sent before it is deleted,
    so a crash in between leaves a duplicate (which the finalizer's claim absorbs), never a loss."""
    moved = 0
    while moved < limit:
        messages = sqs.receive_message(QueueUrl=dead_letter_url, MaxNumberOfMessages=min(10, limit - moved),
                                       WaitTimeSeconds=0).get("Messages", [])
        if not messages:
            return moved
        for message in messages:
            sqs.send_message(QueueUrl=queue_url, MessageBody=message["Body"])
            sqs.delete_message(QueueUrl=dead_letter_url, ReceiptHandle=message["ReceiptHandle"])
            moved += 1
    return moved
