"""What a run forwards: which shards go in which upload to the upstream.

valgrind profiles merge (pids renumbered, ``domain.merge``), in uploads of at most CodSpeed's
benchmark limit each. Other executors' profiles (walltime, memory) hold files that do not
merge (``perf.pipedata``, ``perf.metadata``, msgpack artifacts), so each such shard goes as
its own upload, as its uploader sent it: one run part of the same upstream run. A run of a
single shard is forwarded as it was sent, whatever its executor.
"""

from dataclasses import dataclass

from codspeed_rules.bundle import VALGRIND

from .ledger import ShardRecord
from .merge import plan_uploads


@dataclass(frozen=True)
class Upload:
    shards: tuple[str, ...]
    merged: bool  # False: one shard's archive and metadata, forwarded as its uploader sent them


def plan_forward(shards: dict[str, ShardRecord], limit: int) -> list[Upload]:
    """The uploads of a run, in a stable order (a retry makes the same plan)."""
    if len(shards) == 1:
        return [Upload(tuple(shards), merged=False)]
    names = sorted(shards)
    valgrind = [(n, shards[n].benchmarks or 0) for n in names if shards[n].executor == VALGRIND]
    uploads = [Upload(tuple(group), merged=True) for group in plan_uploads(valgrind, limit)]
    return uploads + [Upload((n,), merged=False) for n in names if shards[n].executor != VALGRIND]
