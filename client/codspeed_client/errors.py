"""Every failure the client reports: one sentence, one documented exit code."""

from __future__ import annotations

OK = 0
UNEXPECTED = 1
USAGE = 2
CONFIG = 3
AUTH = 4
REFUSED = 5
NETWORK = 6
INPUT = 7
FORWARD_FAILED = 10
SHARDS_MISSING = 11
TIMEOUT = 12
REGRESSED = 13
OVERLAPPED = 14


class Skipped(Exception):
    """Nothing to do, and nothing wrong: said as a CI warning, exit 0 (a fork's pull request)."""


class ClientError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
