"""``codspeed-aggregator merge``: the finalizer's merge, on files, for a CI job without AWS.

Bundles that ``codspeed-client pack`` (or ``push``) wrote are verified, each in a process of
its own (one per core), and spliced without recompressing, each as soon as it and those before
it are verified. A bundle as the runner makes it is not cut to splice: normalizing it is the
work of a recompression again, so on fewer than SPLICE_CORES cores every bundle is checked as
it is merged and recompressed, in one read of each (the floor's own work: inflating on one
core, compressing on the other). With more cores each is normalized into a scratch copy, in
parallel, and spliced. A bundle that cannot be indexed (a tar read otherwise than its headers
say) makes the merge take the one-read way for all.
"""

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from io import BufferedReader
from pathlib import Path
from typing import IO

from codspeed_rules.index import Index
from codspeed_rules.normalize import NORMALIZED_HEADER
from codspeed_rules.verify import NotNormalized

from .domain.bundle import normalizing, validate_bundle
from .domain.errors import BadBundle
from .domain.gz import usable_cores
from .domain.merge import MergeResult, ShardBundle, ShardRefused, merge_bundles
from .domain.splice import NormalizedShard, splice
from .domain.splice_check import IndexMismatch

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
SPLICE_CORES = 3  # below, normalizing runner bundles to splice them is slower than one read (bench/merge.py)


def _writable(paths: list[str], output: str) -> Path:
    """Where the merged archive goes, refused where it cannot be written or would overwrite a bundle."""
    from .failure import INPUT, USAGE, Failure

    target = Path(output)
    if not output.strip() or target.is_dir():
        raise Failure(f"-o {output!r} is not a file name: give the merged archive's path", USAGE)
    if not target.parent.is_dir():
        raise Failure(f"cannot write {output}: its folder {target.parent} does not exist", INPUT)
    for name in paths:
        if Path(name).exists() and target.exists() and os.path.samefile(name, target):
            raise Failure(f"-o {output} is one of the bundles to merge: write the merged archive elsewhere", USAGE)
    return target


def merge_files(paths: list[str], output: str) -> int:
    target = _writable(paths, output)
    # written beside the output, then renamed: a failed merge never leaves a half archive
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as out:
        try:
            result, how = _merged(paths, out)
        except ShardRefused as exc:
            os.unlink(out.name)
            print(f"codspeed-aggregator: {paths[int(exc.shard) - 1]} refused: {exc}", file=sys.stderr)
            return 7
        except OSError as exc:
            os.unlink(out.name)
            print(f"codspeed-aggregator: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 7
        except BaseException:
            os.unlink(out.name)
            raise
    os.replace(out.name, target)
    moved = sum(len(v) for v in result.renumbered.values())
    print(
        f"merged {len(paths)} bundles into {output} ({how}): {result.size} bytes, {moved} pids renumbered, md5 "
        f"{result.md5}"
    )
    return 0


def _merged(paths: list[str], out: IO[bytes]) -> tuple[MergeResult, str]:
    if usable_cores() >= SPLICE_CORES or all(map(_packed, paths)):
        with tempfile.TemporaryDirectory(prefix="codspeed-merge-") as scratch:
            shards = _prepared(paths, Path(scratch))
            try:
                return splice(shards, out, as_they_come=True), "spliced"
            except (IndexMismatch, _Unindexed):  # merge what is there, as validation reads it
                out.seek(0)
                out.truncate()
            finally:
                shards.close()
    # Each bundle is checked as it is merged (one read of each): its pids are planned as it streams.
    bundles = [ShardBundle(str(index), None, _opening(name)) for index, name in enumerate(paths, start=1)]
    return merge_bundles(bundles, out), "recompressed"


def _opening(path: str | Path) -> Callable[[], BufferedReader]:
    """What opens a bundle when the merge reaches it (not before: one file open at a time)."""
    return lambda: open(path, "rb")


def _packed(path: str) -> bool:
    """Marked as normalized: what the client packs (verified, not normalized again, if it is so)."""
    with open(path, "rb") as bundle:
        return bundle.read(len(NORMALIZED_HEADER)) == NORMALIZED_HEADER


def keep_freed_memory() -> None:
    """Up to 128 MiB freed stays with the process: by default glibc gives the top of a small heap
    back to the system as soon as it is free, so a worker verifying a bundle faults every MiB it
    inflates into in again (100 000 page faults and a quarter of the time for 8 bundles of 32 MB;
    its peak RSS is the same either way). Nothing where the C library has no ``mallopt``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, 32 << 20)  # the largest glibc takes on 64 bits
    mallopt(M_TRIM_THRESHOLD, 128 << 20)


class _Unindexed(Exception):
    """A bundle cannot be indexed (a tar read otherwise than its headers say): none is spliced."""


def _prepared(paths: list[str], scratch: Path) -> Generator[NormalizedShard, None, None]:
    """Every bundle validated and ready to splice, in order, each as soon as it is: the next ones
    are prepared meanwhile, in a process per core. ShardRefused for one that fails a check,
    _Unindexed for one that cannot be indexed."""
    jobs = [(name, scratch / f"{index}.tar.gz") for index, name in enumerate(paths, start=1)]
    workers = min(len(jobs), usable_cores())
    with contextlib.ExitStack() as stack:
        found: Iterator[Prepared] = map(_prepare, jobs)
        if workers > 1:
            pool = stack.enter_context(ProcessPoolExecutor(workers, initializer=keep_freed_memory))
            stack.callback(pool.shutdown, cancel_futures=True)  # a splice given up waits for no bundle not begun
            found = pool.map(_prepare, jobs)
        for index, ready in enumerate(found, start=1):
            if isinstance(ready, str):
                raise ShardRefused(str(index), ready)
            if ready is None:
                raise _Unindexed(paths[index - 1])
            pids, index_doc, copy = ready
            yield NormalizedShard(str(index), pids, index_doc, _opening(copy))


# a bundle ready to splice: its pids, its index, and the normalized object (the bundle itself or its copy)
Prepared = tuple[tuple[int, ...], Index, str | Path] | str | None


def _prepare(job: tuple[str, Path]) -> Prepared:
    """(pids, index, the normalized object: the bundle itself or its copy); the reason a bundle
    is refused; None when it cannot be indexed."""
    source, copy = job
    try:
        try:
            return _normalized(source, copy, verify=True)
        except NotNormalized:  # marked, and not cut so: normalized like any other
            return _normalized(source, copy, verify=False)
    except BadBundle as exc:
        return str(exc)


def _normalized(source: str, copy: Path, verify: bool) -> Prepared:
    with open(source, "rb") as raw, open(copy, "wb") as out:
        reading = normalizing(out, verify=verify)
        summary = validate_bundle(raw, gunzip=reading.gunzip, tap=reading.tap, keep=None)  # it reports no benchmark
        index = reading.close(summary.listing)
    made: str | Path = copy
    if reading.verifier is not None:
        copy.unlink()
        made = source
    return (tuple(summary.pids), index, made) if index is not None else None
