"""Scheduled: close the runs whose deadline passed, so no run hangs forever."""

from aws_lambda_powertools import Logger

from ..wiring import aggregator

logger = Logger(service="codspeed-aggregator")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict, context) -> dict:
    closed = aggregator().sweep()
    logger.info("sweep", extra={"closed": len(closed)})
    return {"closed": [f"{project}#{run_id}" for project, run_id in closed]}
