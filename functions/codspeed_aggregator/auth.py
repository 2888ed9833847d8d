"""API token check: constant-time, 401 when absent, 403 when wrong."""

import hmac

from .domain.errors import Refused


class Unauthorized(Refused):
    status = 401


class Forbidden(Refused):
    status = 403


def check_token(presented: str | None, expected: str | None) -> None:
    if not expected:
        raise Forbidden("the aggregator has no API token configured: every request is refused")
    if not presented:
        raise Unauthorized("missing Authorization header: send the aggregator's token")
    token = presented.removeprefix("Bearer ").strip()
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise Forbidden("the token is not valid for this aggregator")
