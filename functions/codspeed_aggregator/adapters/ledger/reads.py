"""Reads that span item kinds: a consistent snapshot of a whole run, and what one arrival needs."""

import json
import random
import threading
from dataclasses import dataclass

from ...domain.ledger import ArrivalView, RunRecord, ShardRecord, Snapshot
from .codec import (
    PART_PREFIX, RUN_SK, SHARD_PREFIX, TALLY_PREFIX, UPLOAD_PREFIX, TableItems, load, noted_shards, notes_wanted, run_from,
    shard_from, tally_sks, upload_from,
)

KNOWN_RUNS = 32  # runs whose latest snapshot a process keeps, to read only what changed since


@dataclass(frozen=True)
class _Known:
    """A consistent snapshot as read, and its tallies' revisions then."""

    shards: dict
    tally_revs: dict


class SnapshotContended(Exception):
    """A run changed between the pages of every read tried: whoever changed it publishes after."""


class Reads(TableItems):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._known: dict[tuple[str, str], _Known] = {}  # (project, run) -> its latest snapshot read here
        self._known_lock = threading.Lock()

    def snapshot(self, project: str, run_id: str, tries: int = 20) -> Snapshot | None:
        """One consistent read of a run (see domain.ledger), or None when no such run.

        It reads the run's record, its tallies, its shards and its parts, all small: upload requests
        (``UPLOAD#``) and their metadata sort after them, and the shards' benchmarks are in the
        bucket (``results/``). A run that kept changing under every read raises
        ``SnapshotContended``: nothing is ever built from a read that saw two instants."""
        for attempt in range(tries):
            items = self.query_run(project, run_id, "sk < :uploads", {":uploads": UPLOAD_PREFIX})
            snap = _parse(items)
            if snap is None or snap.consistent():
                if snap is not None:
                    self._keep(project, run_id, snap, items)
                return snap
            self._pause(attempt)
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    def changed_snapshot(self, project: str, run_id: str, tries: int = 20) -> Snapshot | None:
        """The same read as ``snapshot``, of the shards changed since this process's last snapshot
        of the run only: the run's record, its tallies and its parts (one Query), the notes of the
        tallies' changes since, then the shards they name (``codec.noted_shards``). A report rebuilt
        after each batch of arrivals reads about as much at a run's 1000th arrival as at its first.
        When the notes do not name every change since (more than a tally keeps, or two writers
        noted one place), it reads the run whole."""
        known = self._known.get((project, run_id))
        if known is None:
            return self.snapshot(project, run_id, tries)
        for attempt in range(tries):
            head = self.query_run(project, run_id, "sk < :shards", {":shards": SHARD_PREFIX})
            wanted = {}
            for tally in (i for i in head if i["sk"].startswith(TALLY_PREFIX)):
                since = notes_wanted(tally["sk"], known.tally_revs.get(tally["sk"], 0), tally.get("rev", 0))
                if since is None:
                    return self.snapshot(project, run_id, tries)
                wanted.update(since)
            notes = self._get_many(project, run_id, list(wanted), attributes=("sk", "rev", "shard"))
            named = noted_shards(wanted, {n["sk"]: n for n in notes})
            if named is None:
                return self.snapshot(project, run_id, tries)
            snap = _parse(head + self._get_many(project, run_id, [f"{SHARD_PREFIX}{n}" for n in sorted(named)]))
            if snap is None:
                return None
            snap = Snapshot(snap.run, {**known.shards, **snap.shards})
            if snap.consistent():
                self._keep(project, run_id, snap, head)
                return snap
            self._pause(attempt)
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    def _keep(self, project: str, run_id: str, snap: Snapshot, items: list[dict]) -> None:
        revs = {i["sk"]: i.get("rev", 0) for i in items if i["sk"].startswith(TALLY_PREFIX)}
        with self._known_lock:
            self._known.pop((project, run_id), None)
            self._known[(project, run_id)] = _Known(dict(snap.shards), revs)
            while len(self._known) > KNOWN_RUNS:
                self._known.pop(next(iter(self._known)))

    def _pause(self, attempt: int) -> None:
        self.sleep(random.uniform(0.5, 1.0) * 0.005 * (attempt + 1))

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
        for item in self._get_many(project, run_id, list(keys)):
            keys[item["sk"]] = item
        run, shard_item, upload = (keys.pop(sk) for sk in list(keys)[:3])
        return ArrivalView(
            run=run_from(run, [t for t in keys.values() if t]) if run else None,
            shard=shard_from(shard_item) if shard_item else None,
            upload=upload_from(upload) if upload else None,
        )

    def shard_view(self, project: str, run_id: str, shard: str) -> tuple[RunRecord | None, ShardRecord | None]:
        """The run's own record (not its tallies) and one shard (what of it is upstream), in one
        small consistent read, however many shards the run has; ``shard`` empty: the run's record alone."""
        keys = {RUN_SK: None, **({f"{SHARD_PREFIX}{shard}": None} if shard else {})}
        for item in self._get_many(project, run_id, list(keys)):
            keys[item["sk"]] = item
        run_item, shard_item = keys.get(RUN_SK), keys.get(f"{SHARD_PREFIX}{shard}")
        return (run_from(run_item, []) if run_item else None), (shard_from(shard_item) if shard_item else None)

    def _get_many(self, project: str, run_id: str, sks: list[str], attributes: tuple[str, ...] = ()) -> list[dict]:
        """The items of one run with these sort keys (those there are), read consistently, 100 a
        request; only ``attributes`` of them, when given."""
        found, wanted = [], [self.key(project, run_id, sk) for sk in sks]
        projection = {"ProjectionExpression": ", ".join(f"#a{i}" for i in range(len(attributes))),
                      "ExpressionAttributeNames": {f"#a{i}": a for i, a in enumerate(attributes)}} if attributes else {}
        while wanted:
            answer = self.db.batch_get_item(RequestItems={self.table: {"Keys": wanted[:100], "ConsistentRead": True,
                                                                       **projection}})
            found += map(load, answer["Responses"].get(self.table, []))
            wanted = wanted[100:] + answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return found


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
            _, kind, index = item["sk"].split("#", 2)
            if kind in parts:
                parts[kind][str(int(index))] = json.loads(item["answer"])
    if run is None:
        return None
    run = run_from(run, tallies)
    run.announced_parts, run.forwarded_parts = parts["announced"], parts["forwarded"]
    return Snapshot(run, shards)
