"""Reads that span item kinds: a consistent snapshot of a whole run, and what one arrival needs."""

import json
import random

from ...domain.ledger import ArrivalView, Snapshot
from .codec import (
    BENCHMARKS_PREFIX, PART_PREFIX, RUN_SK, SHARD_PREFIX, UPLOAD_PREFIX, TableItems, load, run_from, shard_from,
    upload_from,
)
from .results import attach_results


class SnapshotContended(Exception):
    """A run changed between the pages of every read tried: whoever changed it publishes after."""


class Reads(TableItems):
    def snapshot(self, project: str, run_id: str, with_names: bool = False, tries: int = 20) -> Snapshot | None:
        """One consistent read of a run (see domain.ledger), or None when no such run.

        It reads the run's record, its shards and its parts, all small: upload requests
        (``UPLOAD#``), their metadata and the shards' benchmark names sort after them and are
        read only when asked for. A run that kept changing under every read raises
        ``SnapshotContended``: nothing is ever built from a read that saw two instants."""
        for attempt in range(tries):
            snap = _parse(self.query_run(project, run_id, "sk < :uploads", {":uploads": UPLOAD_PREFIX}))
            if snap is None or snap.consistent():
                if snap is not None and with_names:
                    attach_results(snap, self.query_run(project, run_id, "begins_with(sk, :b)", {":b": BENCHMARKS_PREFIX}))
                return snap
            self.sleep(random.uniform(0.5, 1.0) * 0.005 * (attempt + 1))
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    def arrival_view(self, project: str, run_id: str, shard: str, upload_id: str) -> ArrivalView:
        """The three items an arrival needs (run, shard, upload request) in one small consistent read,
        however many shards the run has."""
        keys = {RUN_SK: None, f"{SHARD_PREFIX}{shard}": None, f"{UPLOAD_PREFIX}{shard}#{upload_id}": None}
        answer = self.db.batch_get_item(RequestItems={self.table: {
            "Keys": [self.key(project, run_id, sk) for sk in keys], "ConsistentRead": True}})
        for item in map(load, answer["Responses"].get(self.table, [])):
            keys[item["sk"]] = item
        run, shard_item, upload = keys.values()
        return ArrivalView(
            run=run_from(run) if run else None,
            shard=shard_from(shard_item) if shard_item else None,
            upload=upload_from(upload) if upload else None,
        )


def _parse(items: list[dict]) -> Snapshot | None:
    run, shards, parts = None, {}, {"announced": {}, "forwarded": {}}
    for item in items:
        if item["sk"] == RUN_SK:
            run = run_from(item)
        elif item["sk"].startswith(SHARD_PREFIX):
            shard = shard_from(item)
            shards[shard.name] = shard
        elif item["sk"].startswith(PART_PREFIX):
            _, kind, index = item["sk"].split("#")
            if kind in parts:  # not a part's claim
                parts[kind][str(int(index))] = json.loads(item["answer"])
    if run is None:
        return None
    run.announced_parts, run.forwarded_parts = parts["announced"], parts["forwarded"]
    return Snapshot(run, shards)
