"""One SQS batch of the arrivals' or the finalizer's queue, each message reported apart: Lambda's
partial batch response (``ReportBatchItemFailures``), as powertools' ``process_partial_response`` gives
it. Written here because powertools' batch module builds its parser's pydantic models of every event
source when imported: 78 ms of each cold start of both functions (bench/cold_start.py), for a loop."""

from collections.abc import Callable
from typing import Any, TypedDict

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

logger = Logger()  # service name, level: POWERTOOLS_* environment


class ItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    batchItemFailures: list[ItemFailure]


class AllRecordsFailed(Exception):
    """Every message of the batch failed: the invocation fails, so SQS keeps them all (and the
    function's error alarm sees it), as powertools' ``BatchProcessingError``."""


def partial_response(event: dict[str, Any], handle: Callable[[SQSRecord], None]) -> PartialBatchResponse:
    """``handle`` each message of the batch; those that raised are reported for SQS to hand back,
    the others are deleted."""
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("not an SQS batch: the event has no list of Records")
    failures: list[ItemFailure] = []
    errors: list[Exception] = []
    for raw in records:
        record = SQSRecord(raw)
        try:
            handle(record)
        except Exception as exc:
            logger.exception("message failed: SQS hands it back", extra={"message_id": record.message_id})
            failures.append({"itemIdentifier": record.message_id})
            errors.append(exc)
    if records and len(failures) == len(records):
        raise AllRecordsFailed(f"All records failed processing ({len(records)}): {errors[0]!r}") from errors[0]
    return {"batchItemFailures": failures}
