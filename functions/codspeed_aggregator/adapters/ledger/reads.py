"""Reads that span item kinds: a consistent snapshot of a whole run, and what one arrival needs."""

import json
import random

from ...domain.ledger import ArrivalView, RunRecord, Snapshot
from .codec import (
    PART_PREFIX, RUN_SK, SHARD_PREFIX, TALLY_PREFIX, UPLOAD_PREFIX, TableItems, load, run_from, shard_from,
    tally_sks, upload_from,
)


class SnapshotContended(Exception):
    """A run changed between the pages of every read tried: whoever changed it publishes after."""


class Reads(TableItems):
    def snapshot(self, project: str, run_id: str, tries: int = 20) -> Snapshot | None:
        """One consistent read of a run (see domain.ledger), or None when no such run.

        It reads the run's record, its tallies, its shards and its parts, all small: upload requests
        (``UPLOAD#``) and their metadata sort after them, and the shards' benchmarks are in the
        bucket (``results/``). A run that kept changing under every read raises
        ``SnapshotContended``: nothing is ever built from a read that saw two instants."""
        for attempt in range(tries):
            snap = _parse(self.query_run(project, run_id, "sk < :uploads", {":uploads": UPLOAD_PREFIX}))
            if snap is None or snap.consistent():
                return snap
            self.sleep(random.uniform(0.5, 1.0) * 0.005 * (attempt + 1))
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    def run_with_parts(self, project: str, run_id: str) -> RunRecord | None:
        """The run's record and its parts' items (which the upstream announced and holds), none of
        its shards: what a part's finalizer reads, however many shards the run has."""
        snap = _parse(self.query_run(project, run_id, "sk < :shards", {":shards": SHARD_PREFIX}))
        return snap.run if snap else None

    def arrival_view(self, project: str, run_id: str, shard: str, upload_id: str) -> ArrivalView:
        """What an arrival needs (the run with its tallies, the shard, the upload request) in one
        small consistent read, however many shards the run has."""
        keys = {RUN_SK: None, f"{SHARD_PREFIX}{shard}": None, f"{UPLOAD_PREFIX}{shard}#{upload_id}": None,
                **dict.fromkeys(tally_sks())}
        wanted = [self.key(project, run_id, sk) for sk in keys]
        while wanted:
            answer = self.db.batch_get_item(RequestItems={self.table: {"Keys": wanted, "ConsistentRead": True}})
            for item in map(load, answer["Responses"].get(self.table, [])):
                keys[item["sk"]] = item
            wanted = answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        run, shard_item, upload = (keys.pop(sk) for sk in list(keys)[:3])
        return ArrivalView(
            run=run_from(run, [t for t in keys.values() if t]) if run else None,
            shard=shard_from(shard_item) if shard_item else None,
            upload=upload_from(upload) if upload else None,
        )


def _parse(items: list[dict]) -> Snapshot | None:
    run, tallies, shards, parts = None, [], {}, {"announced": {}, "forwarded": {}}
    for item in items:
        if item["sk"] == RUN_SK:
            run = item
        elif item["sk"].startswith(TALLY_PREFIX):
            tallies.append(item)
        elif item["sk"].startswith(SHARD_PREFIX):
            shard = shard_from(item)
            shards[shard.name] = shard
        elif item["sk"].startswith(PART_PREFIX):
            _, kind, index = item["sk"].split("#")
            if kind in parts:  # not a part's claim
                parts[kind][str(int(index))] = json.loads(item["answer"])
    if run is None:
        return None
    run = run_from(run, tallies)
    run.announced_parts, run.forwarded_parts = parts["announced"], parts["forwarded"]
    return Snapshot(run, shards)
