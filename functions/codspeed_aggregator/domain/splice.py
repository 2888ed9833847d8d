"""The merge without recompression: normalized bundles (``codspeed_rules.normalize``) spliced
into one standard gzip member.

Every segment that stays as it was (the bulk of each file) is copied compressed, byte for
byte; only the small ones that change are encoded again: every member's header (its name may
move, its mode loses setuid bits), the head of a ``<pid>.out`` whose pid moves (its ``pid:``
line), and the end-of-archive. The CRC-32 of the whole is combined from the segments' without
their data, and the MD5 taken while writing. A member that changes beyond that (a pid of
another width, a callgrind file with more than one ``pid:`` line, a ``results/<pid>.json``
whose ``creator.pid`` moves) is decoded and encoded again alone.

The index is trusted only as far as it is bound to the object: segments must follow each
other in the object, and the object read must have the CRC-32 and size the index names; else
``IndexMismatch``, and the caller merges the original bundles instead. What the splice writes is
inflated as it is written (``SpliceCheck``), but for the segments an index marks INFLATED_ALONE:
those were inflated alone when the index was made, and are bound to it by the object's CRC-32,
checked before the archive's trailer is written.
"""

import base64
import struct
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from isal import isal_zlib

from codspeed_rules.callgrind import OUT_NAME, PidRewriter
from codspeed_rules.index import BODY, HEAD, PAD, Index, Member, Sealed, Segment
from codspeed_rules.normalize import BLOCK, FINAL_BLOCK, GZIP_HEADER, NORMALIZED_HEADER, Writable
from codspeed_rules.results import RESULTS_NAME
from codspeed_rules.tar import CHUNK, BadBundle, Readable

from . import gz
from .merge import (
    CREATOR,
    MAX_RESULTS_BYTES,
    HashingWriter,
    MemberNames,
    MergeResult,
    Sink,
    renamed,
    root_entry,
)
from .pid_plan import planned
from .splice_check import IndexMismatch, SpliceCheck

END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


@dataclass(frozen=True)
class NormalizedShard:
    name: str
    pids: tuple[int, ...]
    index: Index
    open: Callable[[], AbstractContextManager[Readable]]  # the normalized object


class _Cursor:
    """Reads a normalized object front to back, hashing all of it, refusing to go backwards.
    ``inflated_alone``: its index says each segment was inflated alone when it was made."""

    def __init__(self, stream: Readable, inflated_alone: bool = False) -> None:
        self._stream, self.position, self._crc = stream, 0, 0
        self.inflated_alone = inflated_alone

    def _take(self, n: int) -> bytes:
        data = self._stream.read(n)
        if len(data) != n:
            raise IndexMismatch(f"the object ends at byte {self.position + len(data)}, before its index says")
        self._crc = isal_zlib.crc32(data, self._crc)
        self.position += n
        return data

    def seek(self, offset: int) -> None:
        if offset < self.position:
            raise IndexMismatch(f"a segment at byte {offset} overlaps the one before it")
        while self.position < offset:
            self._take(min(CHUNK, offset - self.position))

    def read(self, offset: int, length: int) -> bytes:
        self.seek(offset)
        return self._take(length)

    def copy(self, offset: int, length: int, sink: Writable) -> None:
        for data in self.chunks(offset, length):
            sink.write(data)

    def chunks(self, offset: int, length: int) -> Iterator[bytes]:
        self.seek(offset)
        while length:
            data = self._take(min(CHUNK, length))
            length -= len(data)
            yield data

    def finish(self, expected: Sealed) -> None:
        while data := self._stream.read(CHUNK):
            self._crc = isal_zlib.crc32(data, self._crc)
            self.position += len(data)
        if (self.position, self._crc) != (expected.size, expected.crc32):
            raise IndexMismatch(
                f"the object read ({self.position} bytes, CRC-32 {self._crc}) is not the one indexed "
                f"({expected.size} bytes, CRC-32 {expected.crc32})"
            )


class _Spliced:
    """The output: one gzip member whose deflate stream is the segments, in order. It is inflated
    as it is written, but for segments inflated alone before, and must come to what the segments'
    indexes promise, or it is refused (``IndexMismatch``) before anything is forwarded."""

    def __init__(self, out: Sink, level: int) -> None:
        self.sink = HashingWriter(out)
        self.sink.write(GZIP_HEADER)
        self._comp = isal_zlib.compressobj(level, isal_zlib.DEFLATED, -15)
        self._checked = SpliceCheck()
        self.crc, self.size = 0, 0  # what the whole inflates to
        self._checked_crc, self._checked_size = 0, 0  # what the segments inflated here inflate to

    def write(self, packed: bytes) -> None:
        self.sink.write(packed)
        self._checked.feed(packed)

    def _promised(self, crc: int, size: int, checked: bool) -> None:
        self.crc, self.size = isal_zlib.crc32_combine(self.crc, crc, size), self.size + size
        if checked:
            self._checked_crc = isal_zlib.crc32_combine(self._checked_crc, crc, size)
            self._checked_size += size

    def encoded(self, data: bytes) -> None:
        """Data encoded here, as a segment of its own."""
        if data:
            self.write(self._comp.compress(data) + self._comp.flush(isal_zlib.Z_FULL_FLUSH))
            self._checked.segment_done()
            self._promised(zlib.crc32(data), len(data), checked=True)

    def copied(self, cursor: _Cursor, segment: Segment) -> None:
        """A segment of a normalized bundle, copied as it is."""
        if cursor.inflated_alone:
            cursor.copy(segment.offset, segment.length, self.sink)
            self._checked.gap()  # what follows is inflated by a fresh inflater, as it was when indexed
        else:
            cursor.copy(segment.offset, segment.length, self)
            self._checked.segment_done()
        self._promised(segment.crc, segment.unpacked, checked=not cursor.inflated_alone)

    def close(self) -> None:
        self.write(FINAL_BLOCK)
        crc, size = self._checked.result()
        if (crc, size) != (self._checked_crc, self._checked_size):
            raise IndexMismatch(
                f"the spliced archive inflates to {size} bytes (CRC-32 {crc}), not to the "
                f"{self._checked_size} bytes (CRC-32 {self._checked_crc}) its segments' indexes promise"
            )
        self.sink.write(struct.pack("<II", self.crc, self.size & 0xFFFFFFFF))

    def abandon(self) -> None:
        self._checked.stop()


def splice(shards: Iterable[NormalizedShard], out: Sink, *, level: int = 1, as_they_come: bool = False) -> MergeResult:
    """Write the merged tar.gz of normalized bundles to ``out``; the same members, names and
    contents as ``merge_bundles`` writes from the bundles themselves. ``as_they_come``: each
    shard is spliced as soon as ``shards`` hands it over (the offline merge verifies the next
    ones meanwhile), its pids planned as they come (``pid_plan.planned``)."""
    names, renumbered = MemberNames(), {}
    spliced = _Spliced(out, level)
    try:
        spliced.encoded(root_entry().tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
        for shard, moves in planned(shards, as_they_come):
            if shard.index.inflated_alone:
                _adds_up(shard)
            with shard.open() as stream:
                cursor = _Cursor(stream, shard.index.inflated_alone)
                for member in shard.index.members:
                    _splice_member(member, cursor, spliced, shard.name, moves, names)
                cursor.finish(shard.index.object)
            if moves:
                renumbered[shard.name] = moves
        spliced.encoded(END_OF_ARCHIVE)
        spliced.close()
    finally:
        spliced.abandon()
    return MergeResult(
        md5=base64.b64encode(spliced.sink.md5.digest()).decode(),
        size=spliced.sink.size,
        members=sorted(names.written),
        renumbered=renumbered,
    )


def _adds_up(shard: NormalizedShard) -> None:
    """An index marked INFLATED_ALONE places the segments the splice copies unchecked: they must
    follow each other from the object's gzip header on and come to the tar's length and CRC-32."""
    index = shard.index
    at, crc, size = len(NORMALIZED_HEADER), 0, 0
    for segment in index.segments():
        if segment.offset != at:
            raise IndexMismatch(
                f"shard {shard.name}: its index places a {segment.kind} segment at byte {segment.offset}, not {at}"
            )
        at, size = at + segment.length, size + segment.unpacked
        crc = isal_zlib.crc32_combine(crc, segment.crc, segment.unpacked)
    if (crc, size) != (index.crc, index.size) or at > index.object.size - 8:
        raise IndexMismatch(
            f"shard {shard.name}: its index's segments come to {size} bytes (CRC-32 {crc}) ending at "
            f"byte {at}, not to its tar's {index.size} bytes (CRC-32 {index.crc})"
        )


def _segments(member: Member) -> dict[str, Segment]:
    return {segment.kind: segment for segment in member.segments}


def _header(path: str, member: Member, size: int) -> bytes:
    info = tarfile.TarInfo("./" + path)
    info.type = tarfile.DIRTYPE if member.type == "dir" else tarfile.REGTYPE
    info.size, info.mode, info.mtime = size, member.mode & 0o777, member.mtime
    return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


def _splice_member(
    member: Member, cursor: _Cursor, spliced: _Spliced, shard: str, moves: dict[int, int], names: MemberNames
) -> None:
    path, segments = member.name, _segments(member)
    if not path:
        return  # the archive's root folder: the merged archive has its own members only
    if member.type not in ("file", "dir"):
        raise BadBundle(f"shard {shard}: member {path!r} is not a regular file or folder")
    if member.type == "dir":
        if (placed := names.place_folder(path, shard)) is not None:
            spliced.encoded(_header(placed, member, 0))
        return
    placed = names.place(renamed(path, moves), shard)
    out, results = OUT_NAME.match(path), RESULTS_NAME.match(path)
    old = int(out["pid"]) if out else int(results["pid"]) if results else None
    new = moves.get(old) if old is not None else None
    if old is None or new is None:
        _copy_member(member, placed, segments, cursor, spliced)
    elif out and len(str(old)) == len(str(new)) and member.pid_lines == 1 and HEAD in segments:
        _splice_head(member, placed, segments, cursor, spliced, shard, (old, new))
    elif results and member.size > MAX_RESULTS_BYTES:
        _copy_member(member, placed, segments, cursor, spliced)  # as the merge leaves it: too large to rewrite
    else:
        _encode_member(member, placed, segments, cursor, spliced, (old, new, bool(out)))


def _splice_head(
    member: Member,
    placed: str,
    segments: dict[str, Segment],
    cursor: _Cursor,
    spliced: _Spliced,
    shard: str,
    pids: tuple[int, int],
) -> None:
    """A callgrind file whose pid keeps its width: only its head (which ends with its one ``pid:``
    line) is inflated and rewritten, its body copied as it was compressed."""
    spliced.encoded(_header(placed, member, member.size))
    head_at = segments[HEAD]
    head = _inflated(isal_zlib.decompressobj(-15), cursor.read(head_at.offset, head_at.length), member.name)
    if len(head) != head_at.unpacked or zlib.crc32(head) != head_at.crc:
        raise IndexMismatch(f"shard {shard}: the head of {member.name} does not match its index")
    spliced.encoded(_rewrite_head(head, *pids))
    for kind in (BODY, PAD):
        if kind in segments:
            spliced.copied(cursor, segments[kind])


def _inflated(inflate: Any, packed: bytes, path: str) -> bytes:
    try:
        inflated: bytes = inflate.decompress(packed)
        return inflated
    except gz.INFLATE_ERROR as exc:  # the object is not the one indexed: its CRC-32 would say so at its end
        raise IndexMismatch(f"{path} does not inflate as indexed ({exc})") from exc


def _rewrite_head(head: bytes, old: int, new: int) -> bytes:
    """A callgrind head ends with its ``pid:`` line (the only one in the file)."""
    line = b"pid: %d\n" % old
    if not head.endswith(line):
        raise IndexMismatch(f"a callgrind head does not end with 'pid: {old}'")
    return head[: -len(line)] + b"pid: %d\n" % new


def _copy_member(member: Member, placed: str, segments: dict[str, Segment], cursor: _Cursor, spliced: _Spliced) -> None:
    spliced.encoded(_header(placed, member, member.size))
    for kind in (HEAD, BODY, PAD):
        if kind in segments:
            spliced.copied(cursor, segments[kind])


def _encode_member(
    member: Member,
    placed: str,
    segments: dict[str, Segment],
    cursor: _Cursor,
    spliced: _Spliced,
    rewrite: tuple[int, int, bool],
) -> None:
    """A member whose content changes beyond its head: decoded, rewritten, encoded again (rare:
    the merge plans pids of the same width whenever one is free). ``rewrite``: its old pid, its
    new one, and whether it is a callgrind file (else a results file)."""
    old, new, callgrind = rewrite
    with tempfile.TemporaryFile() as spool:
        inflate = isal_zlib.decompressobj(-15)
        rewriter = PidRewriter(old, new) if callgrind else None
        for kind in (HEAD, BODY):
            if kind not in segments:
                continue
            for chunk in cursor.chunks(segments[kind].offset, segments[kind].length):
                data = _inflated(inflate, chunk, placed)
                spool.write(rewriter.feed(data) if rewriter else data)
        if rewriter:
            spool.write(rewriter.close())
        if PAD in segments:
            cursor.seek(segments[PAD].offset + segments[PAD].length)
        size = spool.tell()
        spool.seek(0)
        if not callgrind:  # results/<pid>.json: its creator.pid moves with the pid
            content = CREATOR.sub(
                lambda m: m.group(1) + (b"%d" % new if int(m.group(2)) == old else m.group(2)), spool.read()
            )
            size = len(content)
            spool.seek(0)
            spool.truncate()
            spool.write(content)
            spool.seek(0)
        spliced.encoded(_header(placed, member, size))
        while data := spool.read(CHUNK):
            spliced.encoded(data)
        spliced.encoded(b"\0" * (-size % BLOCK))
