"""How long a retry waits: one exponential backoff for every retry the aggregator and the client
make themselves (botocore's and urllib3's own retries aside), the HTTP answers worth one, and one
policy for every HTTP retry (the client's, the upstream's, GitHub's and GitLab's): an answer's
``Retry-After`` when it says one, else the backoff."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

TYPE_CHECKING = False  # typing costs the client's start-up: type checkers only read it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")


def retryable(status: int) -> bool:
    """An HTTP answer worth another try, as CodSpeed's runner retries: failing (5xx), timed out (408)
    or too many (429); never another 4xx, which is the request itself."""
    return status >= 500 or status in (408, 429)


@dataclass(frozen=True)
class Retry:
    """A try worth another: why, the wait its answer asked for (``Retry-After``), and what it gave
    (the answer, or the error) for the caller to say when no try succeeded."""

    why: str
    retry_after: str | None = None
    answer: Any = None
    error: BaseException | None = None


def with_retries(
    attempt: Callable[[], T | Retry],
    tries: int,
    base: float,
    cap: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T | Retry:
    """The one retry loop of every HTTP call (the client's, the upstream's, GitHub's and GitLab's):
    ``attempt`` at most ``tries`` times, each caller saying which outcome is worth another
    (``Retry``), waiting ``retry_delay`` between; what the last try gave when none succeeded."""
    outcome: T | Retry = Retry("no try made")
    for made in range(max(1, tries)):
        if made:
            said = outcome.retry_after if isinstance(outcome, Retry) else None
            sleep(retry_delay(made - 1, base, cap, said))
        outcome = attempt()
        if not isinstance(outcome, Retry):
            return outcome
    return outcome


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
