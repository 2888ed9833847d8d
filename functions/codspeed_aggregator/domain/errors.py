"""Refusals the domain raises; handlers map each to one HTTP status. A bundle's refusal,
``BadBundle``, is the shared rules' (``codspeed_rules.bundle``)."""

from typing import TypeVar

from codspeed_rules.tar import BadBundle

__all__ = [
    "AttemptEnded",
    "BadBundle",
    "Busy",
    "Conflict",
    "Forbidden",
    "Gone",
    "HostFailed",
    "HostUnreadable",
    "NotFound",
    "Refused",
    "Unauthorized",
    "Unprocessable",
    "Unsupported",
]


class Refused(Exception):
    """A request that cannot be honoured; the message names the problem."""

    status = 400


class Unauthorized(Refused):
    status = 401


class Forbidden(Refused):
    status = 403


class OidcRefused(Forbidden):
    """A token that is not a valid OIDC token of an issuer taken here; the message says why."""


class NotFound(Refused):
    status = 404


class Conflict(Refused):
    status = 409


class Unsupported(Refused):
    """A body in a media type the route does not read."""

    status = 415


class AttemptEnded(Conflict):
    """An upload of a CI attempt whose aggregator attempt has ended: it opens no other (only the CI's
    next attempt does), and its job is told so, to be re-run."""


class Unprocessable(Refused):
    status = 422


class HostUnreadable(Refused):
    """A host the aggregator asks on a caller's behalf (GitHub) answered in a form its API does not
    document (a field missing): asking again reads the same, so it is no 5xx a client retries."""

    status = 424


class Busy(Exception):
    """A store that still refused a write after every retry, for reasons of its own (contention,
    throttling): nothing the caller sent is wrong, and the same request may succeed later."""


class HostFailed(Exception):
    """A host the aggregator asks on a caller's behalf (GitHub, GitLab) failed, or answered in a form
    its API does not document: nothing the caller sent is wrong, and the message names the host."""


class Gone(Exception):
    """A record this invocation read or wrote a moment ago is no longer there (it expired with its
    run): the invocation fails, and its retry finds the run gone for good."""


T = TypeVar("T")


def existing(found: T | None, what: str) -> T:
    """``found``, which must be there: else ``Gone``, naming ``what``."""
    if found is None:
        raise Gone(f"{what} is gone: its records expired meanwhile")
    return found
