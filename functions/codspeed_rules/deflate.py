"""Raw deflate, as the normalized bundles use it: whether a segment ends where another may
follow (``closed``), and a normalizer's segments inflated alone as they are written (``Proof``)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

CLOSING_BLOCK = b"\x01\x00\x00\xff\xff"  # an empty final stored block: see closed()


class Proof:
    """A normalizer's segments inflated alone as they are written: what the splice would otherwise
    inflate again at every forward, done once (a compressor's full flush is trusted nowhere)."""

    def __init__(self, inflater: Callable[..., Any], crc32: Callable[..., int]) -> None:
        self._inflater, self._crc32 = inflater, crc32
        self._inflate, self._crc, self._size = inflater(), 0, 0
        self.held = True

    def feed(self, packed: bytes) -> None:
        if not packed or not self.held:
            return
        try:  # our own compressor's output: it inflates to no more than was just compressed
            data = self._inflate.decompress(packed)
        except Exception:  # zlib's or isal's error
            self.held = False
            return
        self._crc, self._size = self._crc32(data, self._crc), self._size + len(data)

    def segment_ends(self, size: int, crc: int) -> None:
        if self.held and ((self._size, self._crc) != (size, crc) or not closed(self._inflate)):
            self.held = False
        self._inflate, self._crc, self._size = self._inflater(), 0, 0


def raw_inflater() -> Any:  # zlib's decompressobj: decompress(), eof, unused_data
    return zlib.decompressobj(-15)


def closed(inflate: Any) -> bool:
    """Whether what ``inflate`` (a raw inflater, used up by the test) was fed ends with a complete,
    byte-aligned, non-final block, so that any other such segment may follow it. The test: an
    empty final stored block appended must inflate to nothing and end the stream exactly. Its only
    set bits are its first (BFINAL, where a block must begin: so a block ended at that byte
    boundary) and its last sixteen, where any block header would read the invalid type 3; after
    a final block it is left unused; a stored block still open takes it as data."""
    try:
        extra = inflate.decompress(CLOSING_BLOCK)
    except Exception:  # zlib's or isal's error
        return False
    return not extra and inflate.eof and not inflate.unused_data
