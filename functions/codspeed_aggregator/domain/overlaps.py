"""Benchmarks a run measured more than once: one benchmark in two shards of one executor (a job
that forgot its filter, two shards' filters that meet). Two executors measuring one benchmark is
normal: each is its own measure. Told once the run's shards are all in (at its close)."""

from collections import defaultdict

from codspeed_wire.report import Overlap

from .baseline import first_listed
from .records import ShardRecord

SHARDS_NAMED = 5  # of one overlap: the report says how many more


def overlaps(arrived: dict[str, ShardRecord], names: dict[str, list[str]]) -> tuple[tuple[Overlap, ...], int]:
    """What a run's outcome says of its overlaps: the first listed (``first_listed``), and how many
    there are; ``names`` has the benchmark names of each shard's bundle, by key."""
    held: dict[tuple[str, str], list[str]] = defaultdict(list)
    for shard in sorted(arrived.values(), key=lambda s: s.name):
        for benchmark in dict.fromkeys(names.get(shard.key or "") or ()):
            held[(benchmark, shard.executor)].append(shard.name)
    found = [
        Overlap(benchmark=benchmark, executor=executor, shards=shards[:SHARDS_NAMED], in_shards=len(shards))
        for (benchmark, executor), shards in sorted(held.items())
        if len(shards) > 1
    ]
    kept = first_listed([str(entry.model_dump()) for entry in found])
    return tuple(found[: len(kept)]), len(found)
