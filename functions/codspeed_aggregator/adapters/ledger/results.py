"""Result items: a shard's benchmark names and results, one item beside the shard (out of
snapshots, so a snapshot's read units stay small), read only when a report or a merge asks."""

import json

from ...domain.ledger import Snapshot, ShardRecord
from .codec import BENCHMARKS_PREFIX, run_pk

BENCHMARKS_ITEM_BYTES = 300_000  # under DynamoDB's 400 KB item, whatever the benchmarks' names


def _within(limit: int, names: list[str], results: dict) -> tuple[list[str], dict]:
    """A shard's benchmark names and results, the last ones left out until they fit one item."""
    size = sum(len(n.encode()) + 3 for n in names) + len(json.dumps(results))
    while size > limit and (names or results):
        if results:
            name, result = results.popitem()
            size -= len(json.dumps({name: result}))
        else:
            size -= len(names.pop().encode()) + 3
    return names, results


def results_item(project: str, run_id: str, shard: ShardRecord, expires_at: int) -> dict:
    """The item of a shard's names and results, as the arrival that counts the shard writes it."""
    names, results = _within(BENCHMARKS_ITEM_BYTES, shard.benchmark_names, shard.results)
    return {"pk": run_pk(project, run_id), "sk": f"{BENCHMARKS_PREFIX}{shard.name}", "upload_id": shard.upload_id,
            "names": names, "results": json.dumps(results, separators=(",", ":")), "expires_at": expires_at}


def attach_results(snapshot: Snapshot, items: list[dict]) -> None:
    """Give each shard of a snapshot the names and results of the upload it counted."""
    for item in items:
        shard = snapshot.shards.get(item["sk"].removeprefix(BENCHMARKS_PREFIX))
        if shard is not None and shard.upload_id == item.get("upload_id"):
            shard.benchmark_names = item.get("names") or []
            shard.results = json.loads(item.get("results") or "{}")
