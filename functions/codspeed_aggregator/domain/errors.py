"""Refusals the domain raises; handlers map each to one HTTP status."""


class Refused(Exception):
    """A request that cannot be honoured; the message names the problem."""

    status = 400


class NotFound(Refused):
    status = 404


class Conflict(Refused):
    status = 409


class Unprocessable(Refused):
    status = 422


class BadBundle(Exception):
    """A bundle that failed validation; the message is the reason shown in the report."""
