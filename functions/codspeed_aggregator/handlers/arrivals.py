"""S3 ObjectCreated events, through SQS: validate and count each bundle once."""

import functools
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.data_classes import S3Event
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from ..domain.errors import BadBundle
from ..domain.keys import BUNDLE_PREFIX, parse_bundle_key
from ..settings import settings
from ..wiring import ARRIVALS, for_arrivals, load
from .sqs_batch import PartialBatchResponse, partial_response

logger = Logger()  # service name, level: POWERTOOLS_* environment
metrics = Metrics()
load(ARRIVALS)


def s3_objects(body: dict[str, Any]) -> list[tuple[str, int | None, str | None]]:
    """(key, size, version id) of each created bundle in an S3 notification; S3's test event has none.

    S3 URL-encodes keys in events (a space as ``+``, ``%`` as ``%25``); powertools decodes only
    the first record's ``object_key``, so each record's key is decoded here."""
    if not body.get("Records"):
        return []
    objects = []
    for record in S3Event(body).records:
        if not record.event_name.startswith("ObjectCreated"):
            continue
        created = record.s3.get_object
        key = unquote_plus(created.key)
        if key.startswith(BUNDLE_PREFIX):
            objects.append((key, created.get("size"), created.version_id))
    return objects


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> None:
    left = lambda_context.get_remaining_time_in_millis() / 1000
    objects = s3_objects(record.json_body)
    reserve = sum(settings().arrival_reserve(size) for _, size, _ in objects) or settings().arrival_reserve_seconds
    if left < reserve:
        # Too little of the invocation is left to validate these bundles: the event goes back to
        # the queue as a new message (this one is done), instead of the batch timing out.
        counted = record.message_attributes["deferrals"]
        deferrals = int(counted.string_value or 0) if counted is not None else 0
        outcome = for_arrivals().record_arrival.defer(record.body, deferrals)
        logger.info(f"arrival {outcome}", extra={"seconds_left": round(left), "reserve": round(reserve)})
        return
    try:
        for key, size, version_id in objects:
            try:
                project, run_id, shard, _ = parse_bundle_key(key)
                logger.append_keys(project=project, run_id=run_id, shard=shard)
            except BadBundle:
                pass  # the use case says why it ignores it
            outcome = for_arrivals().record_arrival.record(key, size, version_id)
            logger.info("bundle arrival", extra={"key": key, "outcome": outcome})
    except Exception:
        for_arrivals().record_arrival.retry_later(
            record.receipt_handle, int(record.attributes.approximate_receive_count or 1)
        )
        raise


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialBatchResponse:
    with for_arrivals().reports.held():  # one report per run per batch
        return partial_response(event, functools.partial(record_handler, lambda_context=context))
