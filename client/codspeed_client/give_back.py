"""A grant ``push`` will not use, given back to the aggregator: no close waits for its URL, and its shard
says why on every surface. Only the grantee can: the call names the grant's key."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

from .api import UploadExpired

TYPE_CHECKING = False  # typing costs the client's start-up: type checkers only read it
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from .api import AggregatorApi
    from .bundle import Verdict


@contextmanager
def given_back_unless_sent(api: AggregatorApi, grant: dict[str, Any], verdict: Verdict) -> Iterator[None]:
    """The PUT of ``grant``'s bundle; when it was not answered (the bundle refused by the aggregator's
    rules on its way, a network failure, SIGINT or SIGTERM), the grant is given back
    with why, so no close waits for its URL. A bundle the bucket took all the same still counts."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        yield
    except UploadExpired:
        raise  # nothing waits for a URL that expired: the push asks for another
    except BaseException as exc:
        _give_back(api, grant, _why_not_sent(exc, verdict))
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # as the signal would end it, once the grant is given back


def _why_not_sent(exc: BaseException, verdict: Verdict) -> str:
    if verdict.reason is not None:
        return f"its bundle would be refused by the aggregator: {verdict.reason}"
    if isinstance(exc, KeyboardInterrupt):
        return "the push was interrupted (SIGINT) before its bundle was sent"
    if isinstance(exc, SystemExit):
        return "the push was terminated (SIGTERM) before its bundle was sent"
    return f"its bundle could not be sent: {exc or type(exc).__name__}"


def _give_back(api: AggregatorApi, grant: dict[str, Any], why: str) -> None:
    """Best effort: a give-back that fails leaves the grant awaited while its URL is good, as before."""
    try:
        api.give_back(grant["key"], why)
    except Exception as exc:  # noqa: BLE001 -- the push's own failure is what the job reports
        print(f"warning: upload {grant.get('upload_id')} could not be given back ({exc})", file=sys.stderr)
