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


class BenchmarkScanner:
    """Counts ``Client Request:`` triggers (the ``Metadata:`` one aside) over streamed chunks."""

    _LINE = re.compile(rb"\ndesc: Trigger: Client Request: ([^\n]*)")
    _MAX_TAIL = 1 << 20

    def __init__(self, keep_names: int = 500) -> None:
        self.count = 0
        self.names: list[str] = []
        self._keep = keep_names
        self._tail = b"\n"

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        cut = data.rfind(b"\n")
        if cut < 0:  # mid-way through a long line that holds no trigger start
            self._tail = b"" if len(data) > self._MAX_TAIL else data
            return
        if len(self.names) >= self._keep:  # names kept: counting is all that is left, at memchr speed
            self.count += data.count(TRIGGER, 0, cut) - data.count(TRIGGER + METADATA_TRIGGER, 0, cut)
        else:
            for uri in self._LINE.findall(data, 0, cut):
                uri = uri.strip()
                if uri.startswith(METADATA_TRIGGER):
                    continue
                self.count += 1
                if len(self.names) < self._keep:
                    self.names.append(uri.decode("utf-8", "replace"))
        self._tail = data[cut:]


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
