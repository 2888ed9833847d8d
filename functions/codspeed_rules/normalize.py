"""Normalized bundles: a gzip whose deflate stream is cut, with a full flush (history reset,
byte-aligned), at every place a merge may have to change something, so that a merge copies
every other segment as it is (``codspeed_aggregator.domain.splice``) instead of
decompressing and compressing again.

Each tar member is cut into segments: its header blocks (extended ones included), for a
``<pid>.out`` the head of the file up to and including its ``pid:`` line, the rest of its
content, and its padding; the end-of-archive blocks make the last segment. The index lists
each member (name, type, mode, mtime, size, segments) and each segment (kind, compressed
offset and length, uncompressed length, CRC-32), and the CRC-32 and size of the normalized
object, which bind the index to it. Standard library only: the client writes normalized
bundles too; the aggregator passes a faster compressor.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import BinaryIO, Callable

from .bundle import member_path
from .callgrind import HEADER_BYTES, OUT_NAME

FORMAT = 1
BLOCK = 512
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, unknown OS
FINAL_BLOCK = b"\x03\x00"  # an empty final fixed-Huffman block: ends a deflate stream of full-flushed segments
HEADER, HEAD, BODY, PAD, END = "header", "head", "body", "pad", "end"
EXTENDED = (b"L", b"K", b"x", b"g", b"X")
PID_LINE_START = b"\npid: "
PAX_PATH = re.compile(rb"(\d+) path=")


def raw_compressor(level: int):
    return zlib.compressobj(level, zlib.DEFLATED, -15)


def _octal(field: bytes) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # base-256, GNU's form for large values
        value = int.from_bytes(field[1:], "big")
        return -value if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _padded(size: int) -> int:
    return -size % BLOCK


class Normalizer:
    """Fed a tar's bytes in order (``feed``), writes the normalized gzip to ``out``;
    ``close`` answers the index. Memory: one header block and, for a callgrind file, its first
    64 KiB (where its ``pid:`` line is)."""

    def __init__(self, out: BinaryIO, level: int = 1, compressor: Callable = raw_compressor,
                 full_flush: int = zlib.Z_FULL_FLUSH) -> None:
        self._out, self._full_flush = out, full_flush
        self._comp = compressor(level)
        self._object_crc = zlib.crc32(GZIP_HEADER)
        out.write(GZIP_HEADER)
        self._offset = len(GZIP_HEADER)  # compressed bytes written
        self.crc, self.size = 0, 0
        self.members: list[dict] = []
        self._segment = {"start": self._offset, "ulen": 0, "crc": 0}
        self._member_segments: list[list] = []
        self._state, self._remaining = "header", 0
        self._block = bytearray()
        self._ext = bytearray()
        self._ext_type, self._ext_size = b"", 0
        self._callgrind, self._head_limit = False, 0
        self._long_name: str | None = None
        self._pax_path: str | None = None
        self._head: bytearray | None = None
        self._tail = b""  # the last bytes of a callgrind body, to find pid lines across chunks
        self.broken = False

    # -- writing segments -----------------------------------------------------------

    def _write(self, data) -> None:
        if not data:
            return
        data = bytes(data)
        self._segment["ulen"] += len(data)
        self._segment["crc"] = zlib.crc32(data, self._segment["crc"])
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self._emit(self._comp.compress(data))

    def _emit(self, packed: bytes) -> None:
        if packed:
            self._object_crc = zlib.crc32(packed, self._object_crc)
            self._out.write(packed)
            self._offset += len(packed)

    def _cut(self, kind: str) -> list | None:
        """End the current segment (if it holds anything) as ``kind``; answers it."""
        segment = self._segment
        if segment["ulen"] == 0:
            return None
        self._emit(self._comp.flush(self._full_flush))
        cut = [kind, segment["start"], self._offset - segment["start"], segment["ulen"], segment["crc"]]
        self._segment = {"start": self._offset, "ulen": 0, "crc": 0}
        return cut

    def _cut_member(self, kind: str) -> None:
        if (cut := self._cut(kind)) is not None:
            self._member_segments.append(cut)

    # -- walking the tar ------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Never raises on what it is fed: a tar it cannot cut leaves it broken (``close`` answers
        None), and the validation reading the same bytes says what is wrong with them."""
        if self.broken:
            return
        try:
            self._feed(data)
        except (ValueError, IndexError, UnicodeError):
            self.broken = True

    def _feed(self, data: bytes) -> None:
        view, at = memoryview(data), 0
        while at < len(view):
            if self._state == "end":
                self._write(view[at:])
                return
            if self._state == "header":
                take = min(BLOCK - len(self._block), len(view) - at)
                self._block += view[at:at + take]
                at += take
                if len(self._block) == BLOCK:
                    self._header_block(bytes(self._block))
                    self._block.clear()
                continue
            take = min(self._remaining, len(view) - at)
            chunk = view[at:at + take]
            at += take
            self._remaining -= take
            if self._state == "ext":
                self._write(chunk)
                self._ext += chunk
                if not self._remaining:
                    self._extended_done()
            elif self._state == "body":
                self._body(chunk)
            elif self._state == "pad":
                self._write(chunk)
                if not self._remaining:
                    self._cut_member(PAD)
                    self._close_member()
                    self._state = "header"

    def _header_block(self, block: bytes) -> None:
        if not block.strip(b"\0"):
            self._state = "end"
            self._write(block)
            return
        kind, size = block[156:157], _octal(block[124:136])
        self._write(block)
        if kind in EXTENDED:
            self._state, self._remaining, self._ext_type, self._ext_size = "ext", size + _padded(size), kind, size
            self._ext.clear()
            return
        name = self._long_name or self._pax_path
        if name is None:
            prefix = block[345:500].split(b"\0", 1)[0] if block[257:262] == b"ustar" else b""
            raw = block[0:100].split(b"\0", 1)[0]
            name = ((prefix + b"/" + raw) if prefix else raw).decode("utf-8", "surrogateescape")
        self._long_name = self._pax_path = None
        path = member_path(name)
        regular = kind in (b"0", b"\0", b"7")
        self.members.append({
            "name": path, "type": "file" if regular else "dir" if kind == b"5" else kind.decode("latin-1"),
            "mode": _octal(block[100:108]) & 0o777, "mtime": _octal(block[136:148]), "size": size if regular else 0,
            "pid_lines": 0, "segments": self._member_segments,
        })
        self._cut_member(HEADER)
        size = size if regular else 0
        if size:
            self._state, self._remaining = "body", size
            self._callgrind = OUT_NAME.match(path) is not None
            self._head = bytearray() if self._callgrind else None
            self._head_limit = min(size, HEADER_BYTES)
            self._tail = b""
        else:
            self._close_member()
            self._state = "header"

    def _extended_done(self) -> None:
        data = bytes(self._ext[: self._ext_size])
        if self._ext_type == b"L":
            self._long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        elif self._ext_type == b"x":
            self._pax_path = _pax_path(data)
        self._state = "header"

    def _body(self, chunk) -> None:
        if self._head is not None:  # a callgrind file's head, held until its pid: line is found
            room = self._head_limit - len(self._head)
            self._head += chunk[:room]
            chunk = chunk[room:]
            if len(self._head) == self._head_limit:
                self._end_head()
        if self._head is None and len(chunk):
            if self._callgrind:
                self._count_pid_lines(bytes(chunk))
            self._write(chunk)
        if not self._remaining:
            if self._head is not None:
                self._end_head()
            self._cut_member(BODY)
            padding = _padded(self.members[-1]["size"])
            if padding:
                self._state, self._remaining = "pad", padding
            else:
                self._close_member()
                self._state = "header"

    def _end_head(self) -> None:
        head, self._head = bytes(self._head), None
        start = head.find(PID_LINE_START)
        line_end = head.find(b"\n", start + 1) if start >= 0 else -1
        if line_end < 0:  # no pid line in the head (validation refuses such a file): all body
            self._count_pid_lines(head)
            self._write(head)
            return
        self.members[-1]["pid_lines"] += 1
        self._write(head[: line_end + 1])
        self._cut_member(HEAD)
        rest = head[line_end + 1:]
        self._tail = head[max(0, line_end + 1 - len(PID_LINE_START)): line_end + 1]
        self._count_pid_lines(rest)
        self._write(rest)

    def _count_pid_lines(self, data: bytes) -> None:
        joined = self._tail + data
        self.members[-1]["pid_lines"] += joined.count(PID_LINE_START)
        self._tail = joined[-(len(PID_LINE_START) - 1):] if len(joined) >= len(PID_LINE_START) else joined

    def _close_member(self) -> None:
        self._member_segments = []  # the next member's; the last one's list stays in its entry

    def close(self) -> dict | None:
        """Ends the stream; answers the index of what was written, or None when the tar could
        not be cut (it ended inside a member, or a header did not parse)."""
        if self.broken or self._state not in ("end", "header") or self._block:
            return None
        end = self._cut(END)
        tail = FINAL_BLOCK + struct.pack("<II", self.crc, self.size & 0xFFFFFFFF)
        self._emit(tail)
        return {
            "format": FORMAT, "members": self.members, "end": end, "crc": self.crc, "size": self.size,
            "object": {"size": self._offset, "crc32": self._object_crc},
        }


def _pax_path(records: bytes) -> str | None:
    """The ``path`` record of a PAX extended header, if it has one."""
    at = 0
    while at < len(records):
        space = records.find(b" ", at)
        if space < 0:
            return None
        length = int(records[at:space] or b"0")
        if length <= 0:
            return None
        record = records[space + 1: at + length - 1]
        key, _, value = record.partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "surrogateescape")
        at += length
    return None
