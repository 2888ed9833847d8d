"""The check of a spliced archive: what its deflate stream inflates to, inflated in pieces on
threads of their own beside the copying and hashing, so that nothing is forwarded that does not
come to what its segments' indexes promise."""

import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from isal import isal_zlib

from codspeed_rules.deflate import closed

from . import gz
from .gz import usable_cores

PIECE = 8 << 20  # compressed bytes of whole segments that one thread checks, at the least
QUEUED = 8  # chunks of a piece (of at most 1 MiB each) written and not yet inflated
INFLATE_OUT = 4 << 20  # inflated at a time: ISA-L inflates a fifth faster into 4 MiB than into 1 MiB
CHECK_THREADS = 4  # at most: the copying and hashing take a core of their own
INLINE = 256 << 10  # a piece no larger is inflated by the writer: handing it to a thread costs more


class IndexMismatch(Exception):
    """A normalized bundle does not match its index: it is not spliced."""


class SpliceCheck:
    """What the spliced deflate stream inflates to, checked in pieces on threads of their own
    (ISA-L lets go of the GIL while it inflates), beside the copying and hashing: its CRC-32 and
    length. A piece is whole segments, at least PIECE compressed bytes but the last, inflated by
    a fresh inflater as it streams in. That is the stream's own inflate: ISA-L refuses a distance
    back past a piece's start, and each piece but the last must end ``closed`` (a complete,
    byte-aligned, non-final block), so the next one starts where a block starts. A segment that
    is not checked here (``gap``) ends a piece: what follows it starts a piece of its own. Memory
    stays flat: at most twice as many pieces open as threads, each holding at most QUEUED chunks,
    and one of at most INLINE bytes that has no thread yet."""

    def __init__(self) -> None:
        threads = min(CHECK_THREADS, usable_cores())
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="splice-check")
        self._room = threading.BoundedSemaphore(2 * threads)
        self._checks: list[Future[tuple[int, int]]] = []
        self._piece: queue.Queue[bytes | bool] | None = None  # a piece's segments, then whether it ends the stream
        self._small: list[bytes] = []  # the piece's first chunks, until it has INLINE bytes
        self._held = 0

    def feed(self, packed: bytes) -> None:
        self._held += len(packed)
        if self._piece is not None:
            self._piece.put(packed)
            return
        self._small.append(packed)
        if self._held > INLINE:
            self._room.acquire()
            self._piece = queue.Queue(maxsize=QUEUED)
            self._checks.append(self._pool.submit(self._check, self._piece))
            for chunk in self._small:
                self._piece.put(chunk)
            self._small = []

    def segment_done(self) -> None:
        if self._held >= PIECE:
            self._end_piece(last=False)

    def gap(self) -> None:
        """A segment was written that is not checked here (it was inflated alone before)."""
        self._end_piece(last=False)

    def _end_piece(self, last: bool) -> None:
        if self._piece is not None:
            self._piece.put(last)  # the end of the piece: a bool, whether it ends the stream
        elif self._small:
            self._checks.append(_inflated_here(self._small, last))
        self._piece, self._small, self._held = None, [], 0

    def _check(self, chunks: queue.Queue[bytes | bool]) -> tuple[int, int]:
        inflated, packed = _PieceInflate(), None
        try:
            while not isinstance(packed := chunks.get(), bool):
                inflated.feed(packed)
            return inflated.result(last=packed)
        finally:
            while not isinstance(packed, bool):  # read to its end whatever failed: its writer never waits on it
                packed = chunks.get()
            self._room.release()

    def stop(self) -> None:
        """The threads end, whatever happened to the splice (idempotent)."""
        self._small = []
        self._end_piece(last=False)
        self._pool.shutdown(wait=True)

    def result(self) -> tuple[int, int]:
        """(CRC-32, length) of what the stream's checked pieces, ended, inflate to; IndexMismatch
        when a piece does not inflate alone or does not end where a block does."""
        if self._piece is None and not self._small:
            raise IndexMismatch("the spliced archive's deflate stream does not end with a segment checked here")
        self._end_piece(last=True)
        crc, size = 0, 0
        for check in self._checks:  # the first piece that failed, in order, says why; all are read to their end
            piece_crc, piece_size = check.result()
            crc, size = isal_zlib.crc32_combine(crc, piece_crc, piece_size), size + piece_size
        return crc, size


def _inflated_here(chunks: list[bytes], last: bool) -> Future[tuple[int, int]]:
    done: Future[tuple[int, int]] = Future()
    try:
        inflated = _PieceInflate()
        for chunk in chunks:
            inflated.feed(chunk)
        done.set_result(inflated.result(last=last))
    except Exception as exc:  # kept in order with the threads' pieces: the first that failed says why
        done.set_exception(exc)
    return done


class _PieceInflate:
    """One piece, inflated alone as it streams in: its CRC-32 and length."""

    def __init__(self) -> None:
        self._inflate = isal_zlib.decompressobj(-15)
        self._crc, self._size = 0, 0

    def feed(self, packed: bytes) -> None:
        if self._inflate.eof:
            raise IndexMismatch("the spliced archive's deflate stream ends before its last segment")
        while packed:
            self._inflated(packed)
            packed = self._inflate.unconsumed_tail

    def _inflated(self, packed: bytes) -> bytes:
        try:
            data = self._inflate.decompress(packed, INFLATE_OUT)
        except gz.INFLATE_ERROR as exc:
            raise IndexMismatch(f"the spliced archive does not inflate ({exc})") from exc
        self._crc, self._size = isal_zlib.crc32(data, self._crc), self._size + len(data)
        return data

    def result(self, last: bool) -> tuple[int, int]:
        inflate = self._inflate
        while not inflate.eof and self._inflated(b""):
            pass
        if last and not (inflate.eof and not inflate.unused_data):
            raise IndexMismatch("the spliced archive's deflate stream does not end with its last segment")
        if not last and not closed(inflate):
            raise IndexMismatch("a piece of the spliced archive does not end where a deflate block does")
        return self._crc, self._size
