"""Verifying a bundle marked as normalized (``Verifier``) instead of normalizing it again, and the
reading that picks which an arrival does (``Normalizing``); see ``normalize`` for the format."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, BinaryIO

from .deflate import closed, raw_inflater
from .index import END, Index, Sealed, Segment
from .normalize import FULL_FLUSH_END, NORMALIZED_HEADER, Normalizer
from .tar import CHUNK, read_exactly


class NotNormalized(Exception):
    """A bundle marked as normalized is not cut where a normalizer cuts: read it as any other."""


class Verifier:
    """The tar inside a bundle marked as normalized (``raw`` is the rest of the object after its
    gzip header), read like a gzip reader reads it, and checked to be cut exactly as a normalizer
    cuts that tar: ``index`` is then that index, made from what was read, never from the bundle.

    The compressed bytes are inflated segment by segment, each by a fresh inflater (a segment that
    refers to bytes before it fails to inflate), while a normalizer without output walks what they
    inflate to. Each cut of that walk must fall where a full flush ends in the stream (the bytes
    00 00 FF FF), and there the segment must be ``closed``. Raises NotNormalized when it
    is not so, and what gzip readers raise when the stream is corrupt."""

    def __init__(
        self, raw: BinaryIO, inflater: Callable[..., Any] = raw_inflater, crc32: Callable[..., int] = zlib.crc32
    ) -> None:
        self._raw, self._inflater, self._crc32 = raw, inflater, crc32
        self._walker = Normalizer(None, crc32=crc32)
        self._position = len(NORMALIZED_HEADER)  # object offset of the next compressed byte fed
        self._object_crc = crc32(NORMALIZED_HEADER)
        self._segment_start = self._position
        self._inflate = inflater()
        self._inflated_bytes, self._inflated_crc = 0, 0  # what the current segment inflated to
        self._trailer = b""
        self._pieces = self._inflated_object()
        self._rest = b""
        self._placed: list[tuple[int, int]] = []  # (offset, length) of each cut of the walk, in order
        self.index: Index | None = None

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self, n: int = -1) -> bytes:
        data, self._rest = self._rest or next(self._pieces, b""), b""
        if 0 <= n < len(data):
            data, self._rest = data[:n], data[n:]
        return data

    def _inflated_object(self) -> Iterator[bytes]:
        """The tar's bytes, at most CHUNK at a time (a bomb never inflates at once)."""
        held = b""  # the last bytes of a read may begin a flush's end
        while chunk := self._raw.read(CHUNK):
            self._object_crc = self._crc32(chunk, self._object_crc)
            data, at = held + chunk, 0
            while (found := data.find(FULL_FLUSH_END, at)) >= 0:
                yield from self._inflated(data[at : found + 4])
                at = found + 4
                self._at_flush()
            keep = min(len(FULL_FLUSH_END) - 1, len(data) - at)
            yield from self._inflated(data[at : len(data) - keep])
            held = data[len(data) - keep :]
        yield from self._inflated(held)
        self._finish()

    def _inflated(self, packed: bytes) -> Iterator[bytes]:
        self._position += len(packed)
        while True:
            if self._inflate.eof:
                self._trailer += packed
                return
            try:
                data = self._inflate.decompress(packed, CHUNK)
            except Exception as exc:  # zlib's or isal's error: a segment refers to bytes before it, or worse
                raise NotNormalized(f"a segment does not inflate alone ({exc})") from exc
            if data:
                self._inflated_bytes += len(data)
                self._inflated_crc = self._crc32(data, self._inflated_crc)
                self._walker.feed(data)
                yield data
            packed = self._inflate.unused_data if self._inflate.eof else self._inflate.unconsumed_tail
            if not packed and len(data) < CHUNK:  # a full answer may leave output behind
                return

    def _at_flush(self) -> None:
        """A full flush may end here: where the walk has just cut, the segment ends."""
        if self._walker.broken:
            return
        if not self._walker.unplaced or self._inflate.eof:
            return
        (cut, ends), *others = self._walker.unplaced
        if others or ends != self._walker.size:
            raise NotNormalized(f"a {cut.kind} segment does not end where the tar's member does (byte {ends})")
        self._check_inflated(cut, ends)
        if not closed(self._inflate):
            raise NotNormalized(f"a {cut.kind} segment does not end with a full flush (byte {ends})")
        self._place(self._position)
        self._walker.unplaced.clear()
        self._inflate = self._inflater()

    def _check_inflated(self, cut: Segment, ends: int) -> None:
        """The compressed bytes placed for a cut inflate, alone, to exactly its bytes: a walk that
        holds bytes back (a callgrind head until its pid: line) must not let a segment run past them."""
        if (self._inflated_bytes, self._inflated_crc) != (cut.unpacked, cut.crc):
            raise NotNormalized(
                f"a {cut.kind} segment inflates to {self._inflated_bytes} bytes where the tar's "
                f"{cut.kind} is {cut.unpacked} (byte {ends})"
            )

    def _place(self, end: int) -> None:
        """The walk's next cut ends at object byte ``end``: every cut is placed, in order."""
        self._placed.append((self._segment_start, end - self._segment_start))
        self._segment_start, self._inflated_bytes, self._inflated_crc = end, 0, 0

    def _finish(self) -> None:
        if not self._inflate.eof:
            raise EOFError("the gzip stream ends before its last block")
        if len(self._trailer) < 8:
            raise EOFError("the gzip stream ends inside its trailer")
        if len(self._trailer) > 8:
            raise NotNormalized("the gzip stream has bytes after its trailer")  # another member, maybe
        crc, size = struct.unpack("<II", self._trailer)
        if (crc, size) != (self._walker.crc, self._walker.size & 0xFFFFFFFF):
            raise zlib.error("the gzip trailer's CRC-32 or length does not match the data")
        index = self._walker.close()
        if index is None or self._walker.broken:
            return  # a tar the normalizer cannot cut: validation says why, or it is merged as it is
        # Only the end-of-archive segment may hold the final block: a splice re-encodes it, and
        # copies every member's segments into the middle of another stream.
        unplaced = self._walker.unplaced
        if len(unplaced) > 1 or (unplaced and unplaced[-1][0].kind != END):
            cut = unplaced[0][0]
            raise NotNormalized(f"a {cut.kind} segment ends the deflate stream: it cannot be copied into another")
        if unplaced:
            self._check_inflated(*unplaced[0])
            self._place(self._position - 8)
        elif self._inflated_bytes:
            raise NotNormalized("the deflate stream holds bytes after the tar's last segment")
        self.index = self._placed_in(index)

    def _placed_in(self, walked: Index) -> Index:
        """The walk's index with its cuts where they were found in the object, which it is sealed to;
        each segment was inflated alone, above, and the end too."""
        places = iter(self._placed)

        def placed(cut: Segment) -> Segment:
            offset, length = next(places)
            return cut._replace(offset=offset, length=length)

        return replace(
            walked,
            members=[replace(m, segments=[placed(s) for s in m.segments]) for m in walked.members],
            end=placed(walked.end) if walked.end is not None else None,
            object=Sealed(self._position, self._object_crc),
            inflated_alone=True,
        )


class Normalizing:
    """``validate_bundle``'s gunzip and tap for a bundle to splice: one marked as normalized is
    verified as it is read (``Verifier``); any other is normalized by ``normalizer`` as it is
    read, or, without one, refused with NotNormalized. ``verify=False``: the mark is not looked at
    (the second read of a bundle marked as normalized that is not)."""

    def __init__(
        self,
        normalizer: Normalizer | None,
        gunzip: Callable[..., Any],
        inflater: Callable[..., Any] = raw_inflater,
        crc32: Callable[..., Any] = zlib.crc32,
        verify: bool = True,
    ) -> None:
        self._normalizer, self._gunzip, self._inflater, self._crc32 = normalizer, gunzip, inflater, crc32
        self._verify = verify
        self.verifier: Verifier | None = None

    def gunzip(self, raw: BinaryIO) -> Any:  # a Verifier, or the gunzip's stream
        head = read_exactly(raw, len(NORMALIZED_HEADER))
        if head == NORMALIZED_HEADER and self._verify:
            self.verifier = Verifier(raw, self._inflater, self._crc32)
            return self.verifier
        if self._normalizer is None:
            raise NotNormalized("the bundle is not marked as normalized")
        return self._gunzip(_Prepended(head, raw))

    def tap(self, data: bytes) -> None:
        if self.verifier is None and self._normalizer is not None:
            self._normalizer.feed(data)

    def close(self, listing: list[tuple[Any, ...]]) -> Index | None:
        """The index (of the bundle itself when it was verified, else of the normalized copy), when
        its members are exactly those validation read (``BundleSummary.listing``): the splice
        writes the members the index lists, so a tar that ``tarfile`` reads otherwise than this
        walk (a PAX header that overrides a size, or an mtime by a second or more) is not spliced,
        but merged from what validation read. A sub-second mtime (Python's tarfile writes one in
        PAX) is harmless: the merged archive's GNU headers hold whole seconds either way. None
        otherwise, or when the tar could not be cut."""
        if self.verifier is not None:
            index = self.verifier.index
        else:
            index = self._normalizer.close() if self._normalizer is not None else None
        if index is None or len(index.members) != len(listing):
            return None
        for m, (name, kind, size, mode, mtime) in zip(index.members, listing, strict=True):
            # tarfile rounds a sub-second mtime into the ustar field and keeps the exact one in PAX
            if (m.name, m.type, m.size, m.mode) != (name, kind, size, mode) or abs(m.mtime - mtime) >= 1:
                return None
        return index


class _Prepended:
    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head, self._raw = head, raw

    def read(self, n: int = -1) -> bytes:
        if not self._head:
            return self._raw.read(n)
        head, self._head = self._head, b""
        if n < 0:
            return head + self._raw.read()
        if n <= len(head):
            self._head = head[n:]
            return head[:n]
        return head + self._raw.read(n - len(head))
