"""The upstream (CodSpeed) token each project's runs are forwarded with.

CodSpeed's tokens are per repository, so a stack serving several projects keeps one SSM
SecureString per project under one path (``<path>/<owner>/<repo>``), read with the finalizer's
own client and cached by powertools; a project with none is forwarded with the stack's single
token (a one-project stack needs nothing more)."""

import time
from collections.abc import Callable

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from .aws import parameter_missing

MISSING_FOR_SECONDS = 300  # a project with no parameter of its own is looked up again after this


class UpstreamTokens:
    def __init__(
        self,
        path: str | None,
        fallback: str | None,
        read: Callable[[str], str | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = (path or "").rstrip("/")
        self.fallback = fallback
        self.read = read
        self.clock = clock
        self._missing: dict[str, float] = {}

    def parameter(self, project: str) -> str:
        return f"{self.path}/{project}"

    def __call__(self, project: str | None) -> str | None:
        if not self.path or not project:
            return self.fallback
        name, now = self.parameter(project), self.clock()
        if self._missing.get(name, -MISSING_FOR_SECONDS) > now - MISSING_FOR_SECONDS:
            return self.fallback
        try:
            return self.read(name)
        except GetParameterError as exc:
            if not parameter_missing(exc):  # throttled, denied, a KMS error: the forward fails with it and is retried
                raise
            self._missing[name] = now  # no parameter for this project: the stack's token
            return self.fallback
