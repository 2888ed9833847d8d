"""The gzip codec of bundles and merged archives: ISA-L (``isal``), several times faster
than zlib at compressing, with the same gzip format on the wire."""

import gzip
import os
import zlib
from typing import Any

from isal import igzip, igzip_threaded, isal_zlib

from codspeed_rules.normalize import Writable
from codspeed_rules.tar import Readable

NAME = "isal"
# isal compresses at levels 0-3; 1 is the speed/size balance the merge ships with.
DEFAULT_LEVEL = 1
INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]  # isal's stub: an instance, not a class
ERRORS = (EOFError, zlib.error, INFLATE_ERROR, gzip.BadGzipFile)


class _ReadInto:
    """isal reads with ``readinto``; S3 bodies and counting wrappers offer ``read``."""

    def __init__(self, raw: Readable) -> None:
        self._raw = raw

    def read(self, n: int = -1) -> bytes:
        return self._raw.read(n)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def reader(raw: Readable) -> igzip.GzipFile:
    """Decompresses ``raw``; at its end the CRC and length are checked (truncation raises)."""
    return igzip.GzipFile(fileobj=_ReadInto(raw), mode="rb")


def usable_cores() -> int:
    """The cores this process may run on (Lambda gives one vCPU per 1769 MB)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def writer(raw: Writable, level: int = DEFAULT_LEVEL, threads: int | None = None) -> Any:
    """One gzip member (mtime 0: the same input makes the same bytes, whatever the threads),
    compressed beside the reading of the sources: on two threads where there are two cores or
    more (each 1 MiB block is compressed with the one before as its dictionary, so blocks are
    compressed in parallel; a thread of its own writes them in order, with the sink's MD5)."""
    threads = threads or (2 if usable_cores() >= 2 else 1)
    return igzip_threaded.open(raw, "wb", compresslevel=level, threads=threads)


def raw_compressor(level: int = DEFAULT_LEVEL) -> Any:  # compress() and flush(), as zlib's
    """A raw deflate compressor (no gzip framing): segments of a normalized bundle."""
    return isal_zlib.compressobj(level, isal_zlib.DEFLATED, -15)


def raw_inflater() -> Any:  # decompress(), eof and unused_data, as zlib's
    """A raw deflate decompressor: a normalized bundle's segments are inflated one by one."""
    return isal_zlib.decompressobj(-15)


crc32 = isal_zlib.crc32
