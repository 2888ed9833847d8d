"""Finalize queue: merge a run's shards and forward one upload upstream, once."""

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ..adapters.finalize_queue import FinalizeMessage
from ..wiring import aggregator

logger = Logger(service="codspeed-aggregator")
processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> None:
    message = FinalizeMessage.model_validate_json(record.body)
    state = aggregator().finalize(message.project, message.run_id)
    logger.info("finalize", extra={**message.model_dump(), "state": state})


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict, context) -> dict:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
