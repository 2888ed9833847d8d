"""``codspeed-aggregator merge``: the finalizer's merge, on files, for a CI job without AWS.

Bundles that ``codspeed-client pack`` (or ``push``) wrote are normalized and say so: each is
verified (in parallel, one process per core), then they are spliced without recompressing.
When any bundle is not marked as normalized, or its mark does not hold, every bundle is
checked as it is merged, in one read of each."""

import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from codspeed_rules.bundle import read_exactly
from codspeed_rules.normalize import NORMALIZED_HEADER, NotNormalized

from .domain.bundle import normalizing, validate_bundle
from .domain.errors import BadBundle
from .domain.merge import MergeResult, ShardBundle, ShardRefused, merge_bundles
from .domain.splice import IndexMismatch, NormalizedShard, splice


def merge_files(paths: list[str], output: str) -> int:
    from .failure import INPUT, USAGE, Failure

    target = Path(output)
    if not output.strip() or target.is_dir():
        raise Failure(f"-o {output!r} is not a file name: give the merged archive's path", USAGE)
    if not target.parent.is_dir():
        raise Failure(f"cannot write {output}: its folder {target.parent} does not exist", INPUT)
    for name in paths:
        if Path(name).exists() and target.exists() and os.path.samefile(name, target):
            raise Failure(f"-o {output} is one of the bundles to merge: write the merged archive elsewhere", USAGE)
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
    print(f"{how} {len(paths)} bundles into {output}: {result.size} bytes, {moved} pids renumbered, md5 {result.md5}")
    return 0


def _merged(paths: list[str], out) -> tuple[MergeResult, str]:
    shards = _verified(paths)
    if shards is not None:
        try:
            return splice(shards, out), "spliced"
        except IndexMismatch:  # a bundle changed since it was verified: merge what is there now
            out.seek(0)
            out.truncate()
    # Each bundle is checked as it is merged (one read of each): its pids are planned as it streams.
    bundles = [ShardBundle(str(index), None, lambda p=Path(name): open(p, "rb")) for index, name in enumerate(paths, start=1)]
    return merge_bundles(bundles, out), "merged"


def _verified(paths: list[str]) -> list[NormalizedShard] | None:
    """Every bundle verified as normalized, or None when one is not marked so or not cut so."""
    for name in paths:
        with open(name, "rb") as f:
            if read_exactly(f, len(NORMALIZED_HEADER)) != NORMALIZED_HEADER:
                return None
    workers = min(len(paths), os.cpu_count() or 1)
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            found = list(pool.map(_verify, paths))
    else:
        found = [_verify(name) for name in paths]
    if any(f is None for f in found):
        return None
    shards = []
    for index, (name, found_one) in enumerate(zip(paths, found), start=1):
        if isinstance(found_one, str):
            raise ShardRefused(str(index), found_one)
        pids, index_doc = found_one
        shards.append(NormalizedShard(str(index), pids, index_doc, lambda p=name: open(p, "rb")))
    return shards


def _verify(path: str) -> tuple[tuple[int, ...], dict] | str | None:
    """(pids, index) of a normalized bundle; the reason when it is refused; None when it is not normalized."""
    reading = normalizing(None)
    try:
        with open(path, "rb") as f:
            summary = validate_bundle(f, gunzip=reading.gunzip, tap=reading.tap)
    except NotNormalized:
        return None
    except BadBundle as exc:
        return str(exc)
    index = reading.close(summary.listing)
    return (tuple(summary.pids), index) if index is not None else None

