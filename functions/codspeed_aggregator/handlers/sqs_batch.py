"""One SQS batch of the arrivals' or the finalizer's queue, each message reported apart."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType


def sqs_batch() -> BatchProcessor:
    """A processor for one SQS batch, made per invocation: it holds the batch it works on, and the
    local stack's pollers invoke handlers from threads of their own (a Lambda instance takes one
    event at a time)."""
    return BatchProcessor(event_type=EventType.SQS)
