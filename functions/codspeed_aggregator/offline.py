"""``codspeed-aggregator merge``: the finalizer's merge, on files, for a CI job without AWS."""

import os
import sys
import tempfile
from pathlib import Path

from .domain.merge import ShardBundle, ShardRefused, merge_bundles


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
    # Each bundle is checked as it is merged (one read of each): its pids are planned as it streams.
    shards = [ShardBundle(str(index), None, lambda p=Path(name): open(p, "rb")) for index, name in enumerate(paths, start=1)]
    # written beside the output, then renamed: a failed merge never leaves a half archive
    with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", delete=False) as out:
        try:
            result = merge_bundles(shards, out)
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
    print(f"merged {len(shards)} bundles into {output}: {result.size} bytes, {moved} pids renumbered, md5 {result.md5}")
    return 0
