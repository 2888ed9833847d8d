"""How long a retry waits: one exponential backoff for every retry the aggregator and the client
make themselves (botocore's and urllib3's own retries aside), and the HTTP answers worth one."""

from __future__ import annotations

import random

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})  # busy or failing, never the request itself


def backoff(attempt: int, base: float, cap: float, *, jitter: bool = True) -> float:
    """Seconds before try ``attempt + 1`` (``attempt`` counts from 0): ``base`` doubled each time, at
    most ``cap``; with ``jitter``, a random half of it to all of it, so that callers that failed
    together do not come back together."""
    wait: float = min(cap, base * 2 ** max(0, attempt))
    return wait * random.uniform(0.5, 1.0) if jitter else wait
