"""Lambda entry points: parse the event, call one use case, shape the answer."""

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType


def sqs_batch() -> BatchProcessor:
    """A processor for one SQS batch, made per invocation: it holds the batch it works on, and the
    local stack's pollers invoke handlers from threads of their own (a Lambda instance takes one
    event at a time)."""
    return BatchProcessor(event_type=EventType.SQS)
