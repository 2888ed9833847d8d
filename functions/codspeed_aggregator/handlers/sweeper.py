"""Scheduled: close the runs whose deadline passed, so no run hangs forever."""

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from ..domain.metric_names import named
from ..sweeper_wiring import for_sweeper

logger = Logger()  # service name, level: POWERTOOLS_* environment
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    closed = for_sweeper().sweep()
    metrics.add_metric(name=named("RunsClosedAtDeadline"), unit=MetricUnit.Count, value=len(closed))
    logger.info("sweep", extra={"closed": len(closed)})
    return {"closed": [f"{project}#{run_id}" for project, run_id in closed]}
