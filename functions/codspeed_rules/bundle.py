"""Validate a shard's bundle (a tar of a CodSpeed profile folder, gzip-compressed or plain)
in one streaming pass, with the standard library only: the aggregator runs it on arrival
(with a faster gzip decoder), codspeed-client before it sends a shard.

What a valid bundle holds depends on the executor that made it: a valgrind folder has at
least one ``<pid>.out`` callgrind file (or a Tracegrind ``<pid>.tgtrace``); walltime and
memory folders hold results, perf data and maps, and no ``.out`` is required of them."""

from __future__ import annotations

import contextlib
import gzip
import math
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, cast

from .callgrind import HEADER_BYTES, OUT_NAME, BenchmarkScanner, header_pid, looks_like_callgrind
from .results import MAX_RESULTS_JSON, RESULTS_NAME, RawFigures, walltime_results
from .tar import (
    CHUNK,
    DECODING_ERRORS,
    BadBundle,
    BoundedTarInfo,
    CountingReader,
    ForwardOnly,
    Readable,
    member_path,
)

GUNZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def stdlib_gunzip(raw: Readable) -> gzip.GzipFile:
    # gzip's protocol asks for seek(), which reading front to back never calls: ``raw`` only read()s
    opened = gzip.GzipFile(fileobj=cast("IO[bytes]", raw), mode="rb")
    return opened


VALGRIND = "valgrind"
TRACE_NAME = re.compile(r"^(?P<pid>[0-9]{1,10})\.tgtrace$")
MAX_RESULTS = 1_000_000  # benchmarks per bundle whose names and results are kept (all are counted): every
# real one (CodSpeed advises under 1000 per shard), at ~0.3 KB of memory each while validating
MAX_PROCESSES = 10_000  # profiled processes (pids) a bundle holds: their list is one record of the aggregator's
MAX_MTIME = 8**11 - 1  # what a tar header's mtime field holds in octal
NESTED_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


@dataclass(frozen=True)
class BundleLimits:
    max_members: int = 20_000
    max_unpacked_bytes: int = 20 << 30
    max_ratio: int = 200  # unpacked / packed, past the first 64 MiB: a gzip bomb guard
    ratio_floor_bytes: int = 64 << 20


@dataclass
class BundleSummary:
    pids: list[int] = field(default_factory=list)
    benchmarks: int = 0
    benchmark_names: list[str] = field(default_factory=list)
    members: int = 0
    unpacked_bytes: int = 0
    gzipped: bool = True
    files: set[str] = field(default_factory=set, repr=False)
    # every member as read: (path, "file" or "dir", size, permission bits, mtime)
    listing: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    # per benchmark (the first MAX_RESULTS): callgrind costs {"Ir": ...} or walltime {"mean_ns": ...}
    results: dict[str, RawFigures] = field(default_factory=dict, repr=False)


EXECUTORS = (VALGRIND, "walltime", "memory")


def executor_of(paths: list[str]) -> str:
    """Which CodSpeed executor made a profile folder, from its file names."""
    names = [p.rsplit("/", 1)[-1] for p in paths]
    if any(n.endswith(".MemtrackArtifact.msgpack") for n in names):
        return "memory"
    if any(map(_valgrinds, names)):
        return VALGRIND
    if "perf.pipedata" in names or any(p.startswith("results/") and p.endswith(".json") for p in paths):
        return "walltime"
    return VALGRIND


def _valgrinds(name: str) -> bool:  # a callgrind profile, or a trace of one
    return bool(OUT_NAME.match(name) or TRACE_NAME.match(name))


def is_gzip(magic: bytes) -> bool:
    return magic[:2] == b"\x1f\x8b"


def unpacked(
    stream: Readable, gzipped: bool, gunzip: Callable[..., Any] = stdlib_gunzip
) -> contextlib.AbstractContextManager[Readable]:
    """The tar stream of a bundle: decompressed when it is gzip, as it is when it is a plain tar."""
    return gunzip(stream) if gzipped else contextlib.nullcontext(stream)


def validate_bundle(
    stream: Readable,
    executor: str = VALGRIND,
    limits: BundleLimits = BundleLimits(),
    *,
    gunzip: Callable[..., Any] = stdlib_gunzip,
    gunzip_errors: tuple[Any, ...] = GUNZIP_ERRORS,
    tap: Callable[[bytes], None] | None = None,
    keep: int | None = MAX_RESULTS,
) -> BundleSummary:
    """``tap``: given every byte of the tar as it is read (a ``normalize.Normalizer`` makes the
    normalized copy in the same pass); ``keep``: as ``BundleCheck`` takes it."""
    check = BundleCheck(stream, executor, limits, gunzip=gunzip, gunzip_errors=gunzip_errors, tap=tap, keep=keep)
    with check.members() as members:
        for member in members:
            if (content := check.content(member)) is not None:
                while content.read(CHUNK):
                    pass
                check.member_done()
    return check.summary


class BundleCheck:
    """The checks of ``validate_bundle``, for a reader that does something else with each member
    as it goes (the offline merge copies it): ``members()`` yields the tar members, ``content()``
    gives a member's bytes, checked as they are read, and ``member_done()`` ends the member."""

    def __init__(
        self,
        stream: Readable,
        executor: str = VALGRIND,
        limits: BundleLimits = BundleLimits(),
        *,
        gunzip: Callable[..., Any] = stdlib_gunzip,
        gunzip_errors: tuple[Any, ...] = GUNZIP_ERRORS,
        tap: Callable[[bytes], None] | None = None,
        keep: int | None = MAX_RESULTS,
    ) -> None:
        """``keep``: how many benchmarks' names and results to keep (0: count them only; None: no
        benchmark is looked for, for a merge that reports none: no check depends on them)."""
        self.counted = CountingReader(stream)
        self.tap, self.keep = tap, keep
        self.executor, self.limits = executor, limits
        self.gunzip, self.gunzip_errors = gunzip, gunzip_errors
        self.tar: tarfile.TarFile | None = None
        self.summary = BundleSummary()
        self._current: _CheckedContent | None = None

    @contextlib.contextmanager
    def members(self) -> Iterator[Iterator[tarfile.TarInfo]]:
        magic = self.counted.peek(2)
        if not magic:
            raise BadBundle("the bundle is an empty file")
        self.summary.gzipped = is_gzip(magic)
        try:
            with unpacked(self.counted, self.summary.gzipped, self.gunzip) as tar_stream:
                if self.tap is not None:
                    tar_stream = _Tapped(tar_stream, self.tap)
                forward = ForwardOnly(tar_stream)
                with tarfile.open(fileobj=forward, mode="r:", tarinfo=BoundedTarInfo) as tar:
                    self.tar = tar
                    yield self._checked(tar)
                while tar_stream.read(CHUNK):  # to the end, so that gzip checks its CRC and length
                    pass
        except tarfile.ReadError as exc:
            raise BadBundle(_read_error_reason(exc, self.summary.gzipped)) from exc
        except (*self.gunzip_errors, tarfile.StreamError) as exc:
            raise BadBundle(f"the gzip stream is truncated or corrupt ({exc})") from exc
        except DECODING_ERRORS as exc:
            raise BadBundle(f"the bundle cannot be decoded ({type(exc).__name__}: {str(exc)[:200]})") from exc
        if self.summary.members == 0:
            raise BadBundle("the bundle is an empty archive")
        if self.executor == VALGRIND and not self.summary.pids:
            raise BadBundle(
                "the bundle holds no <pid>.out callgrind file (nor a <pid>.tgtrace), "
                "which every valgrind profile folder has"
            )

    def _checked(self, tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
        for member in tar:
            _check_header(member, self.summary, self.limits)
            yield member

    def content(self, member: tarfile.TarInfo) -> _CheckedContent | None:
        """A regular member's bytes, read like a file and checked as they are (None for a folder)."""
        if member.isdir():
            return None
        path = member_path(member.name)
        keep = RESULTS_NAME.match(path) is not None and member.size <= MAX_RESULTS_JSON
        assert self.tar is not None, "content() is read within members()"
        extracted = self.tar.extractfile(member)
        assert extracted is not None, "a regular member has content"
        self._current = _CheckedContent(extracted, path, self.counted, self.limits, keep, self.keep)
        return self._current

    def member_done(self) -> None:
        current, self._current = self._current, None
        assert current is not None, "member_done() follows content()"
        out = OUT_NAME.match(current.path)
        summary = self.summary
        if out:
            _check_out(current.path, int(out["pid"]), current.head, summary)
            if (scanner := current.scanner) is not None:
                summary.benchmarks += scanner.count
                summary.benchmark_names.extend(scanner.names[: MAX_RESULTS - len(summary.benchmark_names)])
                for name, costs in scanner.costs.items():
                    if len(summary.results) < MAX_RESULTS:
                        summary.results[name] = costs
        elif results := RESULTS_NAME.match(current.path):
            self._results_done(current, int(results["pid"]))

    def _results_done(self, current: _CheckedContent, pid: int) -> None:
        """A ``results/<pid>.json``: another executor's process (renumbered where a build's shards merge)
        and its benchmarks; in a valgrind folder, timings beside its callgrind parts' benchmarks."""
        summary, own = self.summary, self.executor != VALGRIND
        if own:
            _add_pid(current.path, pid, summary)
        if current.kept is None:
            return
        measured = walltime_results(bytes(current.kept))
        if own:  # its benchmarks are these (valgrind's are its callgrind parts')
            summary.benchmarks += len(measured)
            summary.benchmark_names.extend(list(measured)[: MAX_RESULTS - len(summary.benchmark_names)])
        for name, stats in measured.items():
            if len(summary.results) < MAX_RESULTS:
                summary.results.setdefault(name, stats)


class _Tapped:
    def __init__(self, raw: Readable, tap: Callable[[bytes], None]) -> None:
        self._raw, self._tap = raw, tap

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if data:
            self._tap(data)
        return data


class _CheckedContent:
    def __init__(
        self,
        reader: Readable,
        path: str,
        counted: CountingReader,
        limits: BundleLimits,
        keep: bool = False,
        names: int | None = MAX_RESULTS,
    ) -> None:
        self._reader, self.path, self._counted, self._limits = reader, path, counted, limits
        self.callgrind = OUT_NAME.match(path) is not None
        self.scanner = BenchmarkScanner(keep_names=names) if self.callgrind and names is not None else None
        self.head = b""
        self.kept = bytearray() if keep else None  # the member's bytes, when its content is read after

    def read(self, n: int = -1) -> bytes:
        chunk = self._reader.read(n)
        counted, limits = self._counted, self._limits
        counted.unpacked += len(chunk)
        if self.kept is not None:
            self.kept += chunk
        if self.callgrind and chunk:
            if len(self.head) < HEADER_BYTES:
                self.head += chunk[: HEADER_BYTES - len(self.head)]
            if self.scanner is not None:
                self.scanner.feed(chunk)
        if counted.unpacked > limits.ratio_floor_bytes and counted.unpacked / max(counted.count, 1) > limits.max_ratio:
            raise BadBundle(f"the bundle expands more than {limits.max_ratio}x: refused as a gzip bomb")
        return chunk


def _read_error_reason(exc: tarfile.ReadError, gzipped: bool) -> str:
    text = str(exc)
    if "empty file" in text:
        return "the bundle is an empty archive"
    if not gzipped:
        return "the bundle is neither gzip-compressed nor a tar archive"
    if "bad checksum" in text or "invalid header" in text or "truncated" in text:
        return "the bundle is gzip but not a tar archive"
    return f"the bundle is not a readable tar.gz ({text})"


def _check_header(member: tarfile.TarInfo, summary: BundleSummary, limits: BundleLimits) -> None:
    path = member_path(member.name)
    summary.members += 1
    if summary.members > limits.max_members:
        raise BadBundle(f"the bundle has more than {limits.max_members} members")
    if not (isinstance(member.mtime, int) or math.isfinite(member.mtime)) or not 0 <= member.mtime <= MAX_MTIME:
        raise BadBundle(f"member {path!r} has a modification time out of range ({member.mtime})")
    if member.isdir():
        summary.listing.append((path, "dir", 0, member.mode & 0o777, member.mtime))
        return
    if member.sparse is not None:
        raise BadBundle(f"member {path!r} is a sparse file: only regular files and folders are accepted")
    if not member.isreg():
        kind = "symlink" if member.issym() else "hard link" if member.islnk() else "device or special file"
        raise BadBundle(f"member {path!r} is a {kind}: only regular files and folders are accepted")
    if path in summary.files:
        raise BadBundle(f"{path} appears twice")
    summary.files.add(path)
    summary.listing.append((path, "file", member.size, member.mode & 0o777, member.mtime))
    if path.lower().endswith(NESTED_ARCHIVES):
        raise BadBundle(f"member {path!r} is an archive inside the archive")
    summary.unpacked_bytes += member.size
    if summary.unpacked_bytes > limits.max_unpacked_bytes:
        raise BadBundle(f"the bundle unpacks to more than {limits.max_unpacked_bytes} bytes")
    if trace := TRACE_NAME.match(path):
        _add_pid(path, int(trace["pid"]), summary)


def _check_out(path: str, pid: int, head: bytes, summary: BundleSummary) -> None:
    if not looks_like_callgrind(head):
        raise BadBundle(f"{path} is not a callgrind file (no '# callgrind format' or 'version:' first line)")
    whole = len(head) < HEADER_BYTES  # else the file goes on past its head, and so may the head's last line
    declared = header_pid(head, whole)
    if declared is None and header_pid(head) is not None:
        raise BadBundle(
            f"{path}'s 'pid:' line runs past its first {HEADER_BYTES // 1024} KiB: its pid cannot be read whole"
        )
    if declared is None:
        raise BadBundle(f"{path} has no 'pid:' header line")
    if declared != str(pid):
        if int(declared) == pid:  # the merge renumbers 'pid: N' lines, and could not find this one
            raise BadBundle(f"{path} writes its pid as 'pid: {declared}', not as 'pid: {pid}'")
        raise BadBundle(f"{path} declares 'pid: {declared}', which does not match its file name")
    _add_pid(path, pid, summary)


def _add_pid(path: str, pid: int, summary: BundleSummary) -> None:
    """A pid the merge renumbers when it collides: named by a ``.out`` or a ``.tgtrace`` (valgrind's), or
    by a ``results/<pid>.json`` (another executor's)."""
    if pid not in summary.pids:
        if len(summary.pids) >= MAX_PROCESSES:
            raise BadBundle(f"{path}: a bundle holds the profiles of {MAX_PROCESSES} processes at most")
        summary.pids.append(pid)
