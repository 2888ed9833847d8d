"""The callgrind format, as far as the wire contract goes: the pid header, benchmark triggers, pid rewriting."""

from __future__ import annotations

import re

OUT_NAME = re.compile(r"^(?P<pid>[0-9]{1,10})\.out$")
PID_LINE = re.compile(rb"^pid: ([0-9]+)$", re.MULTILINE)
TRIGGER = b"\ndesc: Trigger: Client Request: "
METADATA_TRIGGER = b"Metadata:"
HEADER_BYTES = 64 * 1024


def header_pid(head: bytes, whole: bool = True) -> str | None:
    """The pid the file's header declares, as written, or None when it has no ``pid:`` line.
    ``whole``: ``head`` is the whole file; else its last line may go on past it, and is not read
    (a ``pid:`` line cut there would read as another pid)."""
    match = PID_LINE.search(head if whole else head[: head.rfind(b"\n") + 1])
    return match.group(1).decode() if match else None


def looks_like_callgrind(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip()
    return first.startswith(b"# callgrind format") or first.startswith(b"version:")


EVENTS = b"\nevents: "
TOTALS = b"\ntotals: "
EVENTS_WINDOW = 4096  # a part's events line follows its trigger within a few lines


class BenchmarkScanner:
    """Counts ``Client Request:`` triggers (the ``Metadata:`` one aside) over streamed chunks, and
    keeps, for the first ``keep_names`` benchmarks, the name and the costs of its part: the
    ``totals:`` line read against the ``events:`` line before it (``{"Ir": ..., "D1mr": ...}``).
    Lines are found with ``bytes.find``: a callgrind file is mostly cost lines, never parsed."""

    _MAX_TAIL = 1 << 20

    def __init__(self, keep_names: int = 1_000_000) -> None:
        self.count = 0
        self.names: list[str] = []
        self.costs: dict[str, dict[str, int]] = {}
        self._keep = keep_names
        self._tail = b"\n"
        self._events: list[str] = []
        self._pending: str | None = None  # a kept benchmark whose totals line is still to come
        self._events_left = 0  # bytes after the last trigger still to look at for its events line

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        cut = data.rfind(b"\n")
        if cut < 0:  # mid-way through a long line that holds no trigger start
            self._tail = b"" if len(data) > self._MAX_TAIL else data
            return
        if len(self.names) >= self._keep and self._pending is None:  # counting is all that is left: one pass
            self.count += _benchmark_triggers(data, 0, cut)
        else:
            self._scan(data, cut)
        self._tail = data[cut:]

    def _scan(self, data: bytes, end: int) -> None:
        """Two passes at most over the chunk: one finds triggers, one the pending benchmark's
        ``totals:`` line; its ``events:`` line is looked for just after its trigger."""
        pos = 0
        while pos < end:
            if self._pending is not None:
                self._read_events(data, pos, end)  # when the part's events line came after the last chunk
                following = data.find(TRIGGER, pos, end)
                totals = data.find(TOTALS, pos, following if following >= 0 else end)
                if totals >= 0:
                    line = _line(data, totals + len(TOTALS), end)
                    numbers = [int(v) for v in line.split() if v.isdigit()]
                    self.costs[self._pending] = dict(zip(self._events, numbers, strict=False))
                    self._pending = None
                    pos = totals + len(TOTALS) + len(line)
                    continue
                if following < 0:
                    return  # in a later chunk
                self._pending = None  # a part without totals: on to the next benchmark
                pos = following
                continue
            trigger = data.find(TRIGGER, pos, end)
            if trigger < 0:
                return
            if not self._events:  # the file's header may name the events once, before any part
                self._events_left = trigger - pos
                self._read_events(data, pos, trigger)
            start = trigger + len(TRIGGER)
            uri = _line(data, start, end)
            pos = start + len(uri)
            uri = uri.strip()
            if uri.startswith(METADATA_TRIGGER):
                continue
            self.count += 1
            if len(self.names) < self._keep:
                self.names.append(uri.decode("utf-8", "replace"))
                self._pending = self.names[-1]
                self._events_left = EVENTS_WINDOW
                self._read_events(data, pos, end)
            else:
                self.count += _benchmark_triggers(data, pos, end)
                return

    def _read_events(self, data: bytes, start: int, end: int) -> None:
        """Look for an ``events:`` line in the next ``_events_left`` bytes (a window that may
        span chunks: what is passed counts down)."""
        if self._events_left <= 0:
            return
        stop = min(end, start + self._events_left)
        at = data.find(EVENTS, start, stop)
        if at >= 0:
            self._events = _line(data, at + len(EVENTS), end).decode("ascii", "replace").split()
            self._events_left = 0
        else:
            self._events_left -= max(0, stop - start - len(EVENTS))  # the tail of this chunk comes again


def _benchmark_triggers(data: bytes, start: int, end: int) -> int:
    """The benchmark triggers (not the ``Metadata:`` one) between ``start`` and ``end``."""
    found, at = 0, data.find(TRIGGER, start, end)
    while at >= 0:
        found += not data.startswith(METADATA_TRIGGER, at + len(TRIGGER))
        at = data.find(TRIGGER, at + len(TRIGGER), end)
    return found


def _line(data: bytes, start: int, end: int) -> bytes:
    eol = data.find(b"\n", start, end)
    return data[start : end if eol < 0 else eol]


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
        """The chunk rewritten; a tail that may begin a pid line is held back until the next one.
        Most chunks come back as they are, not copied."""
        data = self._carry + chunk if self._carry else chunk
        if self._old in data:
            data = data.replace(self._old, self._new)
        keep = next(
            (size for size in range(min(len(self._old) - 1, len(data)), 0, -1) if data.endswith(self._old[:size])), 0
        )
        self._carry = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def close(self) -> bytes:
        carry, self._carry = self._carry, b""
        return carry
