"""Merge shard bundles into one upload archive in a single streaming pass.

Pids that collide across shards are renumbered: ``<pid>.out``, its ``pid:`` lines and
every other member named by that pid (``perf-<pid>.map``, ``results/<pid>.json``, ...)
move together. A new pid keeps the old one's width, so the member's size is unchanged
and it streams straight through; only when no pid of that width is free is the member
spooled to disk to learn its new size.
"""

import base64
import hashlib
import posixpath
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import BinaryIO

from . import gz
from .bundle import CHUNK, member_path
from codspeed_wire.callgrind import OUT_NAME, PID_TOKEN, PidRewriter

DEFAULT_LEVEL = gz.DEFAULT_LEVEL


@dataclass(frozen=True)
class ShardBundle:
    name: str
    pids: tuple[int, ...]
    open: Callable[[], AbstractContextManager[BinaryIO]]


@dataclass
class MergeResult:
    md5: str  # base64 of the raw MD5, as Content-MD5 and profileMd5 want it
    size: int
    members: list[str] = field(default_factory=list)
    renumbered: dict[str, dict[int, int]] = field(default_factory=dict)


def plan_uploads(shards: list[tuple[str, int]], limit: int) -> list[list[str]]:
    """Group shards (name, benchmark count), in order, into uploads of at most ``limit``
    benchmarks each; a shard over the limit by itself is an upload of its own."""
    groups: list[list[str]] = []
    count = limit + 1
    for name, benchmarks in shards:
        if not groups or count + benchmarks > limit:
            groups.append([])
            count = 0
        groups[-1].append(name)
        count += benchmarks
    return groups


def plan_pids(shards: Iterable[tuple[str, Iterable[int]]]) -> dict[str, dict[int, int]]:
    """For each shard, the pids to renumber (old to new); the first shard to use a pid keeps it."""
    shards = [(name, list(pids)) for name, pids in shards]
    taken = {pid for _, pids in shards for pid in pids}
    used: set[int] = set()
    plan: dict[str, dict[int, int]] = {}
    for name, pids in shards:
        moves = {}
        for pid in pids:
            if pid in used:
                new = _free_pid(pid, taken)
                taken.add(new)
                moves[pid] = new
                pid = new
            used.add(pid)
        plan[name] = moves
    return plan


def _free_pid(pid: int, taken: set[int]) -> int:
    width = len(str(pid))
    low, high = (0 if width == 1 else 10 ** (width - 1)), 10**width
    for candidate in (*range(pid + 1, high), *range(low, pid)):
        if candidate not in taken:
            return candidate
    candidate = high
    while candidate in taken:
        candidate += 1
    return candidate


class _HashingWriter:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.md5 = hashlib.md5()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.md5.update(data)
        self.size += len(data)
        return self._out.write(data)

    def flush(self) -> None:
        self._out.flush()


class _RewritingReader:
    """A member's content with its ``pid:`` lines rewritten, read like a file."""

    def __init__(self, source: BinaryIO, rewriter: PidRewriter) -> None:
        self._source = source
        self._rewriter = rewriter
        self._buffer = b""
        self._done = False

    def read(self, n: int = -1) -> bytes:
        while not self._done and (n < 0 or len(self._buffer) < n):
            chunk = self._source.read(CHUNK)
            if chunk:
                self._buffer += self._rewriter.feed(chunk)
            else:
                self._buffer += self._rewriter.close()
                self._done = True
        if n < 0:
            n = len(self._buffer)
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out


def _is_log(path: str) -> bool:
    return path.endswith(".log")


def _rename(path: str, moves: dict[int, int]) -> str:
    if not moves:
        return path
    folder, base = posixpath.split(path)
    base = PID_TOKEN.sub(lambda m: str(moves.get(int(m.group(1)), m.group(1))), base)
    return posixpath.join(folder, base) if folder else base


def _unique(path: str, shard: str, emitted: set[str]) -> str:
    if path not in emitted:
        return path
    stem, dot, ext = posixpath.basename(path).partition(".")
    base = f"{stem}.shard-{shard}{dot}{ext}"
    folder = posixpath.dirname(path)
    return posixpath.join(folder, base) if folder else base


def merge_bundles(
    shards: list[ShardBundle], out: BinaryIO, *, keep_logs: bool = False, level: int = DEFAULT_LEVEL
) -> MergeResult:
    """Write the merged tar.gz to ``out`` (a single gzip member, members under ``./``)."""
    plan = plan_pids((s.name, s.pids) for s in shards)
    sink = _HashingWriter(out)
    emitted: set[str] = set()
    result = MergeResult(md5="", size=0, renumbered={k: v for k, v in plan.items() if v})
    with gz.writer(sink, level) as packed:
        with tarfile.open(fileobj=packed, mode="w|", format=tarfile.GNU_FORMAT, bufsize=CHUNK, copybufsize=CHUNK) as merged:
            for shard in shards:
                with shard.open() as stream, gz.reader(stream) as unpacked, \
                        tarfile.open(fileobj=unpacked, mode="r|", bufsize=CHUNK, copybufsize=CHUNK) as source:
                    for member in source:
                        _copy_member(source, member, merged, shard.name, plan[shard.name], emitted, keep_logs)
    result.md5 = base64.b64encode(sink.md5.digest()).decode()
    result.size = sink.size
    result.members = sorted(emitted)
    return result


def _copy_member(source, member, merged, shard, moves, emitted, keep_logs) -> None:
    path = member_path(member.name)
    if not path:
        return
    if member.isdir():
        if path not in emitted:
            emitted.add(path)
            info = _copy_info(member, path)
            merged.addfile(info)
        return
    if _is_log(path) and not keep_logs:
        return
    new_path = _unique(_rename(path, moves), shard, emitted)
    emitted.add(new_path)
    info = _copy_info(member, new_path)
    content = source.extractfile(member)
    out = OUT_NAME.match(path)
    old_pid = int(out["pid"]) if out else None
    if old_pid is not None and old_pid in moves:
        rewriter = PidRewriter(old_pid, moves[old_pid])
        if len(str(old_pid)) == len(str(moves[old_pid])):
            merged.addfile(info, _RewritingReader(content, rewriter))
        else:
            with tempfile.TemporaryFile() as spool:
                reader = _RewritingReader(content, rewriter)
                while chunk := reader.read(CHUNK):
                    spool.write(chunk)
                info.size = spool.tell()
                spool.seek(0)
                merged.addfile(info, spool)
        return
    merged.addfile(info, content)


def _copy_info(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo("./" + path)
    info.size = 0 if member.isdir() else member.size
    info.type = member.type
    info.mode = member.mode
    info.mtime = member.mtime
    return info
