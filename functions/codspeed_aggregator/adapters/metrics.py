"""Metrics as CloudWatch embedded-metric logs, through powertools (namespace from
POWERTOOLS_METRICS_NAMESPACE); each handler's ``log_metrics`` flushes them."""

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled  # POWERTOOLS_METRICS_DISABLED, as powertools reads it

__all__ = ["CloudWatchMetrics", "is_metrics_disabled"]


class CloudWatchMetrics:
    def __init__(self) -> None:
        self._metrics = Metrics()  # powertools metrics share one buffer per namespace

    def add(self, name: str, value: float, unit: str = "Count") -> None:
        self._metrics.add_metric(name=name, unit=MetricUnit[unit], value=value)
