"""Metrics as CloudWatch embedded-metric logs, through powertools (namespace from
POWERTOOLS_METRICS_NAMESPACE); each handler's ``log_metrics`` flushes them."""

from typing import Protocol

from aws_lambda_powertools import Metrics as _Powertools
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import (
    is_metrics_disabled,
)  # POWERTOOLS_METRICS_DISABLED, as powertools reads it

from ..domain.metric_names import named

__all__ = ["CloudWatchMetrics", "Metrics", "NoMetrics", "is_metrics_disabled"]


class Metrics(Protocol):
    def add(self, name: str, value: float, unit: str = "Count") -> None: ...


class CloudWatchMetrics:
    def __init__(self) -> None:
        self._metrics = _Powertools()  # powertools metrics share one buffer per namespace

    def add(self, name: str, value: float, unit: str = "Count") -> None:
        self._metrics.add_metric(name=named(name), unit=MetricUnit[unit], value=value)


class NoMetrics:
    """Where metrics are disabled (the local stack, tests): nothing is recorded, each name checked."""

    def add(self, name: str, value: float, unit: str = "Count") -> None:
        named(name)
