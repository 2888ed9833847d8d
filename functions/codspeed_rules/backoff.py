"""How long a retry waits: one exponential backoff for every retry the aggregator and the client
make themselves (botocore's and urllib3's own retries aside), the HTTP answers worth one, and one
policy for every HTTP retry (the client's, the upstream's, GitHub's and GitLab's): an answer's
``Retry-After`` when it says one, else the backoff."""

from __future__ import annotations

import random
import time
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})  # busy or failing, never the request itself


def backoff(attempt: int, base: float, cap: float, *, jitter: bool = True) -> float:
    """Seconds before try ``attempt + 1`` (``attempt`` counts from 0): ``base`` doubled each time, at
    most ``cap``; with ``jitter``, a random half of it to all of it, so that callers that failed
    together do not come back together."""
    wait: float = min(cap, base * 2 ** max(0, attempt))
    return wait * random.uniform(0.5, 1.0) if jitter else wait


def retry_delay(
    attempt: int, base: float, cap: float, retry_after: str | None = None, now: float | None = None
) -> float:
    """Seconds before try ``attempt + 1`` of an HTTP request: what the last answer's ``Retry-After``
    says (seconds, or an HTTP date), at most ``cap``, when it says one; else ``backoff``."""
    said = _retry_after(retry_after, time.time() if now is None else now)
    return min(cap, said) if said is not None else backoff(attempt, base, cap)


def _retry_after(value: str | None, now: float) -> float | None:
    value = (value or "").strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now) if value else None
    except (TypeError, ValueError):
        return None  # not a form RFC 9110 allows: the backoff
