"""What a run forwards: which shards go in which upload to the upstream.

valgrind profiles merge (pids renumbered, ``domain.merge``), in uploads of at most CodSpeed's
benchmark limit each, and of at most ``max_bytes`` of bundles (an upload URL is an S3 PUT:
5 GB at most; and one finalizer invocation merges one upload). Other executors' profiles
(walltime, memory) hold files that do not merge (``perf.pipedata``, ``perf.metadata``,
msgpack artifacts), so each such shard goes as its own upload, as its uploader sent it: one
run part of the same upstream run. A run of a single shard is forwarded as it was sent,
whatever its executor.
"""

import hashlib
from dataclasses import dataclass

from codspeed_rules.bundle import VALGRIND

from .ledger import ShardRecord


@dataclass(frozen=True)
class Upload:
    shards: tuple[str, ...]
    merged: bool  # False: one shard's archive and metadata, forwarded as its uploader sent them


def part_id(upload: Upload, shards: dict[str, ShardRecord]) -> str:
    """A stable id of what an upload holds (its shards, at the objects validated), not of where it
    stands in a plan: a part is claimed, and forwarded, under it."""
    held = "\n".join(f"{name}={shards[name].key}@{shards[name].version_id}" for name in upload.shards)
    return hashlib.sha256(held.encode()).hexdigest()[:24]


MAX_UPLOAD_BYTES = 4 << 30  # under S3's 5 GB PUT, with room for the merge's own bytes


def plan_uploads(shards: list[tuple[str, int, int]], limit: int, max_bytes: int = MAX_UPLOAD_BYTES) -> list[list[str]]:
    """Group shards (name, benchmark count, bundle bytes), in order, into uploads of at most
    ``limit`` benchmarks and ``max_bytes`` each; a shard over either by itself goes alone."""
    groups: list[list[str]] = []
    count = size = 0
    for name, benchmarks, nbytes in shards:
        if not groups or count + benchmarks > limit or size + nbytes > max_bytes:
            groups.append([])
            count = size = 0
        groups[-1].append(name)
        count += benchmarks
        size += nbytes
    return groups


def plan_forward(shards: dict[str, ShardRecord], limit: int, max_bytes: int = MAX_UPLOAD_BYTES) -> list[Upload]:
    """The uploads of a run, in a stable order (a retry makes the same plan)."""
    if len(shards) == 1:
        return [Upload(tuple(shards), merged=False)]
    names = sorted(shards)
    valgrind = [(n, shards[n].benchmarks or 0, shards[n].size or 0) for n in names if shards[n].executor == VALGRIND]
    uploads = [Upload(tuple(group), merged=True) for group in plan_uploads(valgrind, limit, max_bytes)]
    return uploads + [Upload((n,), merged=False) for n in names if shards[n].executor != VALGRIND]
