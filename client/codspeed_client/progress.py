"""Upload progress: a live line (bytes, rate) on a terminal, nothing in CI logs."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, stream=None, interval: float = 0.2) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.interval = interval
        self.sent = 0
        self.started = time.monotonic()
        self._shown = 0.0

    def wrap(self, body):
        return _CountingBody(body, self)

    def advance(self, n: int) -> None:
        self.sent += n
        now = time.monotonic()
        if self.live and (now - self._shown >= self.interval or self.sent >= self.total):
            self._shown = now
            print(
                f"\r  uploading {_mib(self.sent)} / {_mib(self.total)}  {_mib(self.rate())}/s ",
                end="",
                file=self.stream,
                flush=True,
            )
            if self.sent >= self.total:
                print(file=self.stream)

    def rate(self) -> float:
        return self.sent / max(time.monotonic() - self.started, 1e-6)


class _CountingBody:
    def __init__(self, body, progress: Progress) -> None:
        self._body = body
        self._progress = progress

    def __len__(self) -> int:
        return self._progress.total

    def read(self, n: int = -1) -> bytes:
        data = self._body.read(n)
        self._progress.advance(len(data))
        return data


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"
