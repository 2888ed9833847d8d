"""The callgrind format, as far as the wire contract goes: the pid header, benchmark triggers, pid rewriting."""

from __future__ import annotations

import re

OUT_NAME = re.compile(r"^(?P<pid>[0-9]{1,10})\.out$")
PID_LINE = re.compile(rb"^pid: ([0-9]+)$", re.MULTILINE)
TRIGGER = b"\ndesc: Trigger: Client Request: "
METADATA_TRIGGER = b"Metadata:"
HEADER_BYTES = 64 * 1024


def header_pid(head: bytes) -> str | None:
    """The pid the file's header declares, as written, or None when it has no ``pid:`` line."""
    match = PID_LINE.search(head)
    return match.group(1).decode() if match else None


def looks_like_callgrind(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip()
    return first.startswith(b"# callgrind format") or first.startswith(b"version:")


EVENTS = b"\nevents: "
TOTALS = b"\ntotals: "


class BenchmarkScanner:
    """Counts ``Client Request:`` triggers (the ``Metadata:`` one aside) over streamed chunks, and
    keeps, for the first ``keep_names`` benchmarks, the name and the costs of its part: the
    ``totals:`` line read against the ``events:`` line before it (``{"Ir": ..., "D1mr": ...}``).
    Lines are found with ``bytes.find``: a callgrind file is mostly cost lines, never parsed."""

    _MAX_TAIL = 1 << 20

    def __init__(self, keep_names: int = 500) -> None:
        self.count = 0
        self.names: list[str] = []
        self.costs: dict[str, dict[str, int]] = {}
        self._keep = keep_names
        self._tail = b"\n"
        self._events: list[str] = []
        self._pending: str | None = None  # a kept benchmark whose totals line is still to come

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        cut = data.rfind(b"\n")
        if cut < 0:  # mid-way through a long line that holds no trigger start
            self._tail = b"" if len(data) > self._MAX_TAIL else data
            return
        if len(self.names) >= self._keep and self._pending is None:  # counting is all that is left: memchr speed
            self.count += data.count(TRIGGER, 0, cut) - data.count(TRIGGER + METADATA_TRIGGER, 0, cut)
        else:
            self._scan(data, cut)
        self._tail = data[cut:]

    def _scan(self, data: bytes, end: int) -> None:
        found: dict[bytes, int] = {}
        pos = 0
        while True:
            for marker in (TRIGGER, EVENTS, TOTALS):
                if marker not in found or 0 <= found[marker] < pos:
                    found[marker] = data.find(marker, pos, end)
            hits = [(at, marker) for marker, at in found.items() if at >= 0]
            if not hits:
                return
            at, marker = min(hits)
            start = at + len(marker)
            eol = data.find(b"\n", start, end)
            pos = end if eol < 0 else eol
            value = data[start:pos]
            if marker is EVENTS:
                self._events = value.decode("ascii", "replace").split()
            elif marker is TOTALS:
                if self._pending is not None:
                    numbers = [int(v) for v in value.split() if v.isdigit()]
                    self.costs[self._pending] = dict(zip(self._events, numbers))
                    self._pending = None
            else:
                self._pending = None
                uri = value.strip()
                if uri.startswith(METADATA_TRIGGER):
                    continue
                self.count += 1
                if len(self.names) < self._keep:
                    self.names.append(uri.decode("utf-8", "replace"))
                    self._pending = self.names[-1]
                elif self._pending is None:
                    self.count += data.count(TRIGGER, pos, end) - data.count(TRIGGER + METADATA_TRIGGER, pos, end)
                    return


class PidRewriter:
    """Rewrites ``pid: OLD`` lines to ``pid: NEW`` over streamed chunks.

    A callgrind file never starts with its pid line (validation checks the first line),
    so every pid line is preceded by a newline.
    """

    def __init__(self, old: int, new: int) -> None:
        self._old = b"\npid: %d\n" % old
        self._new = b"\npid: %d\n" % new
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._carry + chunk if self._carry else chunk
        if self._old in data:
            data = data.replace(self._old, self._new)
        keep = min(len(data), len(self._old) - 1)
        self._carry = data[len(data) - keep :]
        return data[: len(data) - keep]

    def close(self) -> bytes:
        carry, self._carry = self._carry, b""
        return carry
