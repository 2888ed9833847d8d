"""Finalize queue: end a run, sending upstream what is not there yet (parts: each shard as sent;
one-upload: its shards merged into one upload), once."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from codspeed_wire.queue import FinalizeMessage

from ..wiring import FINALIZER, for_finalizer, load
from .sqs_batch import PartialBatchResponse, partial_response

logger = Logger()  # service name, level: POWERTOOLS_* environment
metrics = Metrics()
load(FINALIZER)


def record_handler(record: SQSRecord) -> None:
    message = FinalizeMessage.model_validate_json(record.body)
    logger.append_keys(project=message.project, run_id=message.run_id, part=message.part, shard=message.shard)
    try:
        if message.shard is not None:
            state = for_finalizer().forward_shard.forward(message.project, message.run_id, message.shard)
        else:
            state = for_finalizer().finalize_run.finalize(message.project, message.run_id, message.part)
    except Exception:
        for_finalizer().finalize_run.retry_later(
            record.receipt_handle, int(record.attributes.approximate_receive_count)
        )
        raise
    logger.info("finalize", extra={**message.model_dump(), "state": state})


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialBatchResponse:
    return partial_response(event, record_handler)
