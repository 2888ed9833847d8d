"""``codspeed-aggregator merge``: the finalizer's merge, on files, for a CI job without AWS."""

import sys
from pathlib import Path

from .domain.bundle import validate_bundle
from .domain.errors import BadBundle
from .domain.merge import ShardBundle, merge_bundles


def merge_files(paths: list[str], output: str) -> int:
    shards = []
    for index, name in enumerate(paths, start=1):
        path = Path(name)
        try:
            with open(path, "rb") as stream:
                summary = validate_bundle(stream)
        except OSError as exc:
            print(f"codspeed-aggregator: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 7
        except BadBundle as exc:
            print(f"codspeed-aggregator: {path} refused: {exc}", file=sys.stderr)
            return 7
        shards.append(ShardBundle(str(index), tuple(summary.pids), lambda p=path: open(p, "rb")))
    with open(output, "wb") as out:
        result = merge_bundles(shards, out)
    moved = sum(len(v) for v in result.renumbered.values())
    print(f"merged {len(shards)} bundles into {output}: {result.size} bytes, {moved} pids renumbered, md5 {result.md5}")
    return 0
