"""Merge valgrind shard bundles into one upload archive in a single streaming pass.

Pids that collide across shards are renumbered: ``<pid>.out``, its ``pid:`` lines and
every other member named by that pid (``perf-<pid>.map``, ``valgrind.<pid>.log``,
``results/<pid>.json`` and the ``creator.pid`` inside it, ...) move together; only the
pid in a name moves (in ``<pid>_<addr>_<addr>_0.unwind_data`` the other digits are
addresses). A new pid keeps the old one's width, so a ``.out`` keeps its size and streams
straight through; only when no pid of that width is free is it spooled to learn its new
size. Every other member, the runner's logs included, is kept; one whose name another
shard already used gets the shard's name added.
"""

import base64
import hashlib
import io
import posixpath
import re
import tarfile
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from codspeed_rules.bundle import GUNZIP_ERRORS, BundleCheck, is_gzip
from codspeed_rules.callgrind import OUT_NAME, PidRewriter
from codspeed_rules.results import RESULTS_NAME
from codspeed_rules.tar import CHUNK, BadBundle, BoundedTarInfo, ForwardOnly, Readable, member_path

from . import gz
from .bundle import unpacked
from .pid_plan import PidMoves, StreamedMoves, plan_pids

# The pid in a member's name: the first number of its base name, alone or after a word and
# '-' or '.', and before '.' or '_' (4242.out, perf-4242.map, valgrind.4242.log, 4242_7f.._0.unwind_data).
PID_IN_NAME = re.compile(r"^(?P<head>(?:[A-Za-z_]+[-.])?)(?P<pid>[0-9]{1,10})(?=[._])")
CREATOR = re.compile(rb'("creator"\s*:\s*\{[^{}]*?"pid"\s*:\s*)([0-9]+)')
MAX_RESULTS_BYTES = 64 << 20  # results/<pid>.json is read whole to rewrite its creator.pid

DEFAULT_LEVEL = gz.DEFAULT_LEVEL


@dataclass(frozen=True)
class ShardBundle:
    name: str
    pids: tuple[int, ...] | None  # None: not validated yet, so checked as it is merged (the offline merge)
    open: Callable[[], AbstractContextManager[Readable]]


class ShardRefused(BadBundle):
    """A bundle checked while merging failed a check: the merge stops, its output is not an archive."""

    def __init__(self, shard: str, reason: str) -> None:
        super().__init__(reason)
        self.shard = shard


@dataclass
class MergeResult:
    md5: str  # base64 of the raw MD5, as Content-MD5 and profileMd5 want it
    size: int
    members: list[str] = field(default_factory=list)
    renumbered: dict[str, dict[int, int]] = field(default_factory=dict)


class Sink(Protocol):
    """Where an archive is written: a file, an S3 multipart upload (``Bucket.spool``)."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


class HashingWriter:
    def __init__(self, out: Sink) -> None:
        self._out = out
        self.md5 = hashlib.md5()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.md5.update(data)
        self.size += len(data)
        self._out.write(data)
        return len(data)

    def flush(self) -> None:
        self._out.flush()


class _RewritingReader:
    """A member's content with its ``pid:`` lines rewritten, read like a file."""

    def __init__(self, source: Readable, rewriter: PidRewriter) -> None:
        self._source = source
        self._rewriter = rewriter
        self._buffer = bytearray()  # appended to and cut from the front: no copy of what stays
        self._done = False

    def read(self, n: int = -1) -> bytes:
        if not self._buffer and not self._done and n > 0:  # the common case: a chunk as read, not copied
            chunk = self._source.read(n)
            piece = self._rewriter.feed(chunk) if chunk else self._end()
            if len(piece) == n:
                return piece
            self._buffer += piece
        while not self._done and (n < 0 or len(self._buffer) < n):
            chunk = self._source.read(CHUNK)
            self._buffer += self._rewriter.feed(chunk) if chunk else self._end()
        if n < 0:
            n = len(self._buffer)
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    def _end(self) -> bytes:
        self._done = True
        return self._rewriter.close()


def renamed(path: str, moves: PidMoves) -> str:
    folder, base = posixpath.split(path)
    match = PID_IN_NAME.match(base)
    if not match or (new := moves.get(int(match["pid"]))) is None:
        return path
    base = f"{match['head']}{new}{base[match.end() :]}"
    return posixpath.join(folder, base) if folder else base


class MemberNames:
    """The member names written so far. No two members share a name, and no path is a file in
    one shard and a folder in another (GNU tar could extract only one of them): a member whose
    name is taken gets the shard's name added (``runner.shard-2.log``), and one under a path
    another shard wrote as a file moves under ``shard-<name>/``."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()  # written, or implied by a member inside
        self.written: set[str] = set()

    @staticmethod
    def _ancestors(path: str) -> list[str]:
        parts = path.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    def _taken(self, path: str, folder: bool) -> bool:
        clash = path in self.files or (not folder and path in self.folders)
        return clash or any(a in self.files for a in self._ancestors(path))

    def place(self, path: str, shard: str) -> str:
        """The name to write a file under."""
        return self._placed(path, shard, folder=False)

    def place_folder(self, path: str, shard: str) -> str | None:
        """The name to write a folder under, or None for a folder already written."""
        if path in self.folders and path not in self.files and path in self.written:
            return None
        return self._placed(path, shard, folder=True)

    def _placed(self, path: str, shard: str, folder: bool) -> str:
        if not (folder and path in self.folders and path not in self.files) and self._taken(path, folder):
            path = self._elsewhere(path, shard, folder)
        (self.folders if folder else self.files).add(path)
        self.folders.update(self._ancestors(path))
        self.written.add(path)
        return path

    def _elsewhere(self, path: str, shard: str, folder: bool) -> str:
        if any(a in self.files for a in self._ancestors(path)) or folder:
            path = f"shard-{shard}/{path}"
        folder_name, base = posixpath.split(path)
        stem, dot, ext = base.partition(".")
        candidate, number = path, 1
        while self._taken(candidate, folder):
            suffix = f".shard-{shard}" + (f"-{number}" if number > 1 else "")
            candidate = (
                posixpath.join(folder_name, f"{stem}{suffix}{dot}{ext}") if folder_name else f"{stem}{suffix}{dot}{ext}"
            )
            number += 1
        return candidate


def merge_bundles(shards: list[ShardBundle], out: Sink, *, level: int = DEFAULT_LEVEL) -> MergeResult:
    """Write the merged tar.gz to ``out`` (a single gzip member, members under ``./``).

    Shards validated before (the finalizer's, at arrival) come with their pids, planned up
    front; shards without (the offline command's) are checked as they are copied, with the
    checks of validation, and their pids planned as they stream: each bundle is read once."""
    known = {s.name: s.pids for s in shards if s.pids is not None}
    plan = plan_pids(known.items())
    used = {p for pids in known.values() for p in pids}  # shared: a pid is taken whichever shard named it first
    streamed = {s.name: StreamedMoves(used) for s in shards if s.pids is None}
    sink = HashingWriter(out)
    names = MemberNames()
    with gz.writer(sink, level) as packed:
        with tarfile.open(  # type: ignore[call-overload]  # copybufsize: TarFile's, not in typeshed's open()
            fileobj=ForwardOnly(packed), mode="w:", format=tarfile.GNU_FORMAT, copybufsize=CHUNK
        ) as merged:
            merged.addfile(root_entry())
            for shard in shards:
                if shard.name in streamed:
                    _copy_checked(shard, merged, streamed[shard.name], names)
                    continue
                with (
                    shard.open() as stream,
                    _tar_stream(stream) as tar_stream,
                    tarfile.open(  # type: ignore[call-overload]  # copybufsize, as above
                        fileobj=ForwardOnly(tar_stream), mode="r:", copybufsize=CHUNK, tarinfo=BoundedTarInfo
                    ) as source,
                ):
                    for member in source:
                        content = source.extractfile(member) if member.isreg() else None
                        _copy_member(member, content, merged, shard.name, plan[shard.name], names)
    renumbered = {**{k: v for k, v in plan.items() if v}, **{k: m.moved() for k, m in streamed.items() if m.moved()}}
    return MergeResult(
        md5=base64.b64encode(sink.md5.digest()).decode(),
        size=sink.size,
        members=sorted(names.written),
        renumbered=renumbered,
    )


def _copy_checked(shard: ShardBundle, merged: tarfile.TarFile, moves: StreamedMoves, names: "MemberNames") -> None:
    with shard.open() as stream:
        check = BundleCheck(stream, gunzip=gz.reader, gunzip_errors=(*gz.ERRORS, *GUNZIP_ERRORS), keep=None)
        try:
            with check.members() as members:
                for member in members:
                    content = check.content(member)
                    _copy_member(member, content, merged, shard.name, moves, names)
                    if content is not None:
                        while content.read(CHUNK):  # what the copy left (none): the checks see every byte
                            pass
                        check.member_done()
        except BadBundle as exc:
            raise ShardRefused(shard.name, str(exc)) from exc


class _Peeked:
    """A stream whose first bytes were read to tell gzip from a plain tar."""

    def __init__(self, raw: Readable) -> None:
        self._raw = raw
        self.head = raw.read(2)

    def read(self, n: int = -1) -> bytes:
        head, self.head = self.head, b""
        if n < 0:
            return head + self._raw.read()
        return head + self._raw.read(n - len(head)) if n > len(head) else head[:n]


def _tar_stream(stream: Readable) -> AbstractContextManager[Readable]:
    peeked = _Peeked(stream)
    return unpacked(peeked, is_gzip(peeked.head))


def _copy_member(
    member: tarfile.TarInfo,
    content: Readable | None,
    merged: tarfile.TarFile,
    shard: str,
    moves: PidMoves,
    names: MemberNames,
) -> None:
    path = member_path(member.name)
    if not path:
        return
    if not (member.isreg() or member.isdir()):  # validation refused these already: never write one
        raise BadBundle(f"shard {shard}: member {path!r} is not a regular file or folder")
    if member.isdir():
        if (placed := names.place_folder(path, shard)) is not None:
            merged.addfile(_copy_info(member, placed))
        return
    assert content is not None, "a regular member has content"
    info = _copy_info(member, names.place(renamed(path, moves), shard))
    out = OUT_NAME.match(path)
    old_pid = int(out["pid"]) if out else None
    if old_pid is not None and (new_pid := moves.get(old_pid)) is not None:
        rewriter = PidRewriter(old_pid, new_pid)
        if len(str(old_pid)) == len(str(new_pid)):
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
    results = RESULTS_NAME.match(path)
    old = int(results["pid"]) if results else None
    if old is not None and (new := moves.get(old)) is not None and member.size <= MAX_RESULTS_BYTES:
        data = CREATOR.sub(
            lambda m: m.group(1) + (b"%d" % new if int(m.group(2)) == old else m.group(2)), content.read()
        )
        info.size = len(data)
        merged.addfile(info, io.BytesIO(data))
        return
    merged.addfile(info, content)


def root_entry() -> tarfile.TarInfo:
    """The ``.`` folder the runner's archives open with (its own archive of a profile folder):
    a merged archive opens with one too, fixed so that a merge is the same bytes every time."""
    info = tarfile.TarInfo(".")
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
    return info


def _copy_info(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo("./" + path)
    info.size = 0 if member.isdir() else member.size
    info.type = member.type
    info.mode = member.mode & 0o777  # no setuid, setgid or sticky bits from a shard
    info.mtime = member.mtime
    return info
