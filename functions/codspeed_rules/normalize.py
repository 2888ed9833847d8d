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

A normalized bundle says so in its gzip header (an extra field), and the aggregator then
verifies it instead of normalizing it again (``Verifier``): each segment is inflated alone and
must end, with a complete byte-aligned block, exactly where a normalizer walking the same tar
cuts. The index comes from what was verified, never from the bundle.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any, Protocol

from .callgrind import HEADER_BYTES, OUT_NAME
from .deflate import Proof
from .index import BODY, END, FORMAT, HEAD, HEADER, PAD, Index, Member, Sealed, Segment
from .tar import member_path

BLOCK = 512
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, unknown OS
# The same with an extra field (RFC 1952 2.3.1.1) saying "normalized, format 1"; gzip readers skip it.
NORMALIZED_HEADER = b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff\x06\x00Cn\x02\x00" + struct.pack("<H", FORMAT)
FULL_FLUSH_END = b"\x00\x00\xff\xff"  # how a full flush ends: an empty stored block
FINAL_BLOCK = b"\x03\x00"  # an empty final fixed-Huffman block: ends a deflate stream of full-flushed segments
EXTENDED = (b"L", b"K", b"x", b"g", b"X")
PID_LINE_START = b"\npid: "


def raw_compressor(level: int) -> Any:  # zlib's compressobj (or ISA-L's): compress() and flush()
    return zlib.compressobj(level, zlib.DEFLATED, -15)


def _octal(field: bytes) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # base-256, GNU's form for large values
        value = int.from_bytes(field[1:], "big")
        return -value if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _padded(size: int) -> int:
    return -size % BLOCK


class Writable(Protocol):
    """Where a normalized gzip goes: a file, a spool, a checksumming wrapper."""

    def write(self, data: bytes, /) -> object: ...


class Normalizer:
    """Fed a tar's bytes in order (``feed``), writes the normalized gzip to ``out``;
    ``close`` answers the index. Memory: one header block and, for a callgrind file, its first
    64 KiB (where its ``pid:`` line is). Without ``out`` it only walks the tar: each cut is then
    listed in ``unplaced`` with the uncompressed offset it ends at, for a ``Verifier`` to place.
    With ``prove`` (a raw inflater's factory) each segment written is inflated alone as it is
    written, and the index is marked INFLATED_ALONE when every one came to what was written."""

    def __init__(
        self,
        out: Writable | None,
        level: int = 1,
        compressor: Callable[..., Any] = raw_compressor,
        full_flush: int = zlib.Z_FULL_FLUSH,
        crc32: Callable[..., Any] = zlib.crc32,
        prove: Callable[..., Any] | None = None,
    ) -> None:
        self._out, self._full_flush, self._crc32 = out, full_flush, crc32
        self._comp = compressor(level) if out is not None else None
        self._proof = Proof(prove, crc32) if prove is not None and out is not None else None
        self._object_crc, self._offset = 0, 0  # of the compressed bytes written
        self._emit(NORMALIZED_HEADER)
        self.unplaced: list[tuple[Segment, int]] = []  # (a cut, the tar byte it ends at)
        self.crc, self.size = 0, 0
        self.members: list[Member] = []
        self._segment = {"start": self._offset, "ulen": 0, "crc": 0}
        self._member_segments: list[Segment] = []
        self._state, self._remaining = "header", 0
        self._block, self._ext, self._ext_type, self._ext_size = bytearray(), bytearray(), b"", 0
        self._callgrind, self._head_limit, self.broken = False, 0, False
        self._long_name: str | None = None
        self._pax_path: str | None = None
        self._head: bytearray | None = None
        self._pid_line = -1  # where the head's first pid: line starts, once found
        self._tail = b""  # the last bytes of a callgrind body, to find pid lines across chunks

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        self._segment["ulen"] += len(data)
        self._segment["crc"] = self._crc32(data, self._segment["crc"])
        self.crc = self._crc32(data, self.crc)
        self.size += len(data)
        if self._comp is not None:
            self._emit_segment(self._comp.compress(data))

    def _emit_segment(self, packed: bytes) -> None:
        self._emit(packed)
        if self._proof is not None:
            self._proof.feed(packed)

    def _emit(self, packed: bytes) -> None:
        if packed and self._out is not None:
            self._object_crc = self._crc32(packed, self._object_crc)
            self._out.write(packed)
            self._offset += len(packed)

    def _cut(self, kind: str) -> Segment | None:
        """End the current segment (if it holds anything) as ``kind``; answers it (placed at -1
        without output: a ``Verifier`` places it)."""
        segment = self._segment
        if segment["ulen"] == 0:
            return None
        if self._comp is None:
            cut = Segment(kind, -1, -1, segment["ulen"], segment["crc"])
            self.unplaced.append((cut, self.size))
        else:
            self._emit_segment(self._comp.flush(self._full_flush))
            cut = Segment(kind, segment["start"], self._offset - segment["start"], segment["ulen"], segment["crc"])
            if self._proof is not None and kind != END:  # the end is never copied: a splice encodes its own
                self._proof.segment_ends(segment["ulen"], segment["crc"])
        self._segment = {"start": self._offset, "ulen": 0, "crc": 0}
        return cut

    def _cut_member(self, kind: str) -> None:
        if (cut := self._cut(kind)) is not None:
            self._member_segments.append(cut)

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
                self._block += view[at : at + take]
                at += take
                if len(self._block) == BLOCK:
                    self._header_block(bytes(self._block))
                    self._block.clear()
                continue
            take = min(self._remaining, len(view) - at)
            chunk = view[at : at + take]
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
        self.members.append(
            Member(
                name=path,
                type="file" if regular else "dir" if kind == b"5" else kind.decode("latin-1"),
                mode=_octal(block[100:108]) & 0o777,
                mtime=_octal(block[136:148]),
                size=size if regular else 0,
                segments=self._member_segments,
            )
        )
        self._cut_member(HEADER)
        size = size if regular else 0
        if size:
            self._state, self._remaining = "body", size
            self._callgrind = OUT_NAME.match(path) is not None
            self._head = bytearray() if self._callgrind else None
            self._head_limit, self._pid_line = min(size, HEADER_BYTES), -1
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

    def _body(self, chunk: bytes | memoryview) -> None:
        if self._head is not None:  # a callgrind file's head, held until its pid: line ends
            chunk = self._grow_head(chunk)
        if self._head is None and len(chunk):
            if self._callgrind:
                self._count_pid_lines(bytes(chunk))
            self._write(chunk)
        if not self._remaining:
            if self._head is not None:
                self._end_head(-1)
            self._cut_member(BODY)
            padding = _padded(self.members[-1].size)
            if padding:
                self._state, self._remaining = "pad", padding
            else:
                self._close_member()
                self._state = "header"

    def _grow_head(self, chunk: bytes | memoryview) -> bytes | memoryview:
        """Takes a callgrind file's first bytes into its head; the head is cut as soon as its first
        ``pid:`` line has ended (a verifier must know a cut when it reaches it). Answers the rest."""
        assert self._head is not None, "a head is held"
        held = len(self._head)
        room = self._head_limit - held
        self._head += chunk[:room]
        rest = chunk[room:]
        start = self._head.find(PID_LINE_START, max(0, held - len(PID_LINE_START) + 1))
        if self._pid_line < 0 and start >= 0:
            self._pid_line = start
        if self._pid_line >= 0:
            line_end = self._head.find(b"\n", max(self._pid_line + 1, held))
            if line_end >= 0:
                self._end_head(line_end)
                return rest
        if len(self._head) == self._head_limit:
            self._end_head(-1)
        return rest

    def _end_head(self, line_end: int) -> None:
        assert self._head is not None, "a head is held"
        head, self._head = bytes(self._head), None
        if line_end < 0:  # no pid line in the head (validation refuses such a file): all body
            self._count_pid_lines(head)
            self._write(head)
            return
        self.members[-1].pid_lines += 1
        self._write(head[: line_end + 1])
        self._cut_member(HEAD)
        rest = head[line_end + 1 :]
        self._tail = head[max(0, line_end + 1 - len(PID_LINE_START)) : line_end + 1]
        self._count_pid_lines(rest)
        self._write(rest)

    def _count_pid_lines(self, data: bytes) -> None:
        keep = len(PID_LINE_START) - 1
        across = (self._tail + data[:keep]).count(PID_LINE_START)  # a line that starts in the last chunk
        self.members[-1].pid_lines += across + data.count(PID_LINE_START)
        self._tail = (self._tail + data)[-keep:] if len(data) < keep else data[-keep:]

    def _close_member(self) -> None:
        self._member_segments = []  # the next member's; the last one's list stays in its entry

    def close(self) -> Index | None:
        """Ends the stream; answers the index of what was written, or None when the tar could
        not be cut (it ended inside a member, or a header did not parse)."""
        if self.broken or self._state not in ("end", "header") or self._block:
            return None
        end = self._cut(END)
        self._emit(FINAL_BLOCK)
        if end is not None and self._comp is not None:
            end = end._replace(length=end.length + len(FINAL_BLOCK))  # the end segment runs to the trailer
        self._emit(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))
        return Index(
            members=self.members,
            end=end,
            crc=self.crc,
            size=self.size,
            object=Sealed(self._offset, self._object_crc),
            inflated_alone=self._proof is not None and self._proof.held,
        )


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
        record = records[space + 1 : at + length - 1]
        key, _, value = record.partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "surrogateescape")
        at += length
    return None
