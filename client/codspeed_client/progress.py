"""Upload progress: a live line (bytes, rate) on a terminal, nothing in CI logs."""

from __future__ import annotations

import sys
import time

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, interval: float = 0.2) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.interval = interval
        self.sent = 0
        self.started = time.monotonic()
        self._shown = 0.0

    def wrap(self, body: BinaryIO) -> _CountingBody:
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
    def __init__(self, body: BinaryIO, progress: Progress) -> None:
        self._body = body
        self._progress = progress

    def __len__(self) -> int:
        return self._progress.total

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._body.read(n)
        self._progress.advance(len(data))
        return data


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"
