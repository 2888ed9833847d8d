"""The sweeper's wiring, apart from the other functions' (``wiring``): its one use case on the
table and the finalize queue, so its cold start loads neither the bucket's, the upstream's nor
GitHub's code, and its package ships none of their libraries."""

import threading
from functools import cache

from .adapters import aws
from .adapters.ledger.closes import Closes
from .adapters.ledger.runs import Runs
from .adapters.queues import FinalizeQueue
from .settings import Settings, settings
from .use_cases.sweep_deadlines import SweepDeadlines

SWEEPER = "sweeper"
_LOCK = threading.RLock()


def for_sweeper() -> SweepDeadlines:
    with _LOCK:  # once a process, even when the local stack's threads ask at once
        return _built()


@cache
def _built() -> SweepDeadlines:
    return build(settings())


def build(config: Settings) -> SweepDeadlines:
    """Refused, before any client is made, when a setting it needs is missing."""
    config.require(SWEEPER, "table_name", "finalize_queue_url")
    table = (config.table_name, aws.client("dynamodb", SWEEPER), config.retention_days * 86400)
    return SweepDeadlines(
        runs=Runs(*table),
        closes=Closes(*table),
        queue=FinalizeQueue(config.finalize_queue_url, aws.client("sqs", SWEEPER)),
    )


def reset() -> None:
    """Forget what was built (``wiring.reset`` calls this with the rest)."""
    with _LOCK:
        _built.cache_clear()
