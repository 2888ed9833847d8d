"""Reads that span item kinds: a consistent snapshot of a whole run, and what one arrival needs."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from codspeed_rules.backoff import backoff

from ...domain.arrival import ArrivalView
from ...domain.barrier import BarrierView, Grant
from ...domain.closing import CiOrigin
from ...domain.outcome import CarriedShard
from ...domain.part_answers import Announced, Delivered
from ...domain.plan_record import PlanRecord
from ...domain.records import RunRecord, ShardRecord, Snapshot
from .codec import (
    ANNOUNCED,
    CARRIED_PREFIX,
    FORWARDED_PART,
    PART_PREFIX,
    RUN_SK,
    SHARD_PREFIX,
    TALLY_PREFIX,
    UPLOAD_PREFIX,
    TableItems,
    noted_shards,
    notes_wanted,
    tally_sks,
)
from .items import shard_from, upload_from
from .run_item import attribute, carried_count, field_from, run_from

log = logging.getLogger(__name__)

KNOWN_RUNS = 32  # runs whose latest snapshot a process keeps, to read only what changed since
HEAD_END = f"{TALLY_PREFIX}~"  # the run's record and its tallies sort from RUN_SK up to it; its parts before


@dataclass(frozen=True)
class _Known:
    """A consistent snapshot as read, its tallies' revisions then, and when the run was opened
    (a run id used again once the first run expired is another run)."""

    shards: dict[str, Any]
    tally_revs: dict[str, Any]
    created_at: str

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "created_at": self.created_at,
                "tally_revs": self.tally_revs,
                "shards": [dataclasses.asdict(s) for s in self.shards.values()],
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> _Known:
        d = json.loads(data)
        shards = {s["name"]: ShardRecord.from_item(s) for s in d["shards"]}
        return cls(shards, {sk: int(rev) for sk, rev in d["tally_revs"].items()}, d["created_at"])


class SnapshotContended(Exception):
    """A run changed between the pages of every read tried: whoever changed it publishes after."""


class Reads(TableItems):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._known: dict[tuple[str, str], _Known] = {}  # (project, run) -> its latest snapshot read here
        self._known_lock = threading.Lock()

    def snapshot(self, project: str, run_id: str, tries: int = 20) -> Snapshot | None:
        """One consistent read of a run (see domain.records), or None when no such run.

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
        """The same read as ``snapshot`` but for the run's parts (a report shows none), of the shards
        changed since this process's last snapshot of the run (or the one it adopted) only: the
        run's record and its tallies (one Query), the notes of the tallies' changes since, then the
        shards they name (``codec.noted_shards``). A report rebuilt after each batch of arrivals
        reads about as much at a run's 1000th arrival as at its first.
        When the notes do not name every change since (more than a tally keeps, or two writers
        noted one place), it reads the run whole."""
        known = self._known.get((project, run_id))
        if known is None:
            return self.snapshot(project, run_id, tries)
        for attempt in range(tries):
            head = self.query_run(project, run_id, "sk BETWEEN :run AND :end", {":run": RUN_SK, ":end": HEAD_END})
            if any(i["sk"] == RUN_SK and _read_whole(i, known) for i in head):
                return self.snapshot(project, run_id, tries)
            wanted = {}
            for tally in (i for i in head if i["sk"].startswith(TALLY_PREFIX)):
                since = notes_wanted(tally["sk"], known.tally_revs.get(tally["sk"], 0), tally.get("rev", 0))
                if since is None:
                    return self.snapshot(project, run_id, tries)
                wanted.update(since)
            notes = self.get_many(project, run_id, list(wanted), attributes=("sk", "rev", "shard"))
            named = noted_shards(wanted, {n["sk"]: n for n in notes})
            if named is None:
                return self.snapshot(project, run_id, tries)
            snap = _parse(head + self.get_many(project, run_id, [f"{SHARD_PREFIX}{n}" for n in sorted(named)]))
            if snap is None:
                return None
            snap = Snapshot(snap.run, {**known.shards, **snap.shards})
            if snap.consistent():
                self._keep(project, run_id, snap, head)
                return snap
            if attempt:  # changed under two reads, or what was known does not add up: read it whole
                return self.snapshot(project, run_id, tries)
            self._pause(attempt)
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    def known(self, project: str, run_id: str) -> bytes | None:
        """What this process last read of a run (its shards, and its tallies' revisions then), for a
        process new to the run to start from (``adopt``); None when it read none."""
        found = self._known.get((project, run_id))
        return found.to_json() if found else None

    def adopt(self, project: str, run_id: str, data: bytes) -> None:
        """Start from what another process read of a run (``known``), unless this one read it
        itself: its next ``changed_snapshot`` reads only the shards changed since, when the tallies'
        notes name them all, and the run whole when they do not."""
        try:
            known = _Known.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("what another process read of run %s of %s is not used: %s", run_id, project, exc)
            return
        with self._known_lock:
            if (project, run_id) not in self._known:
                self._remember(project, run_id, known)

    def knows(self, project: str, run_id: str) -> bool:
        return (project, run_id) in self._known

    def _keep(self, project: str, run_id: str, snap: Snapshot, items: list[dict[str, Any]]) -> None:
        revs = {i["sk"]: i.get("rev", 0) for i in items if i["sk"].startswith(TALLY_PREFIX)}
        with self._known_lock:
            self._remember(project, run_id, _Known(dict(snap.shards), revs, snap.run.created_at))

    def _remember(self, project: str, run_id: str, known: _Known) -> None:
        self._known.pop((project, run_id), None)
        self._known[(project, run_id)] = known
        while len(self._known) > KNOWN_RUNS:
            self._known.pop(next(iter(self._known)))

    def _pause(self, attempt: int) -> None:
        self.sleep(backoff(attempt, 0.005, 0.2))

    def run_with_parts(self, project: str, run_id: str) -> RunRecord | None:
        """The run's record and its parts' items (which the upstream announced and holds), none of
        its shards: what a part's finalizer reads, however many shards the run has."""
        snap = _parse(self.query_run(project, run_id, "sk < :shards", {":shards": SHARD_PREFIX}))
        return snap.run if snap else None

    def arrival_view(self, project: str, run_id: str, shard: str, upload_id: str) -> ArrivalView:
        """What an arrival needs (the run with its tallies, the shard, the upload request) in one
        small consistent read, however many shards the run has."""
        keys = {
            RUN_SK: None,
            f"{SHARD_PREFIX}{shard}": None,
            f"{UPLOAD_PREFIX}{shard}#{upload_id}": None,
            **dict.fromkeys(tally_sks()),
        }
        for item in self.get_many(project, run_id, list(keys)):
            keys[item["sk"]] = item
        run, shard_item, upload = (keys.pop(sk) for sk in list(keys)[:3])
        return ArrivalView(
            run=run_from(run, [t for t in keys.values() if t]) if run else None,
            shard=shard_from(shard_item) if shard_item else None,
            upload=upload_from(upload) if upload else None,
        )

    def shard_view(self, project: str, run_id: str, shard: str) -> tuple[RunRecord | None, ShardRecord | None]:
        """The run's own record (not its tallies) and one shard (what of it is upstream), in one
        small consistent read, however many shards the run has."""
        keys: dict[str, dict[str, Any] | None] = {RUN_SK: None, f"{SHARD_PREFIX}{shard}": None}
        for item in self.get_many(project, run_id, list(keys)):
            keys[item["sk"]] = item
        run_item, shard_item = keys.values()
        return (run_from(run_item, []) if run_item else None), (shard_from(shard_item) if shard_item else None)

    def barrier_view(self, project: str, run_id: str) -> BarrierView | None:
        """What a close's barrier reads, in that order: the run's own item (its state, grant count and
        close), the uploads granted in it (a few hundred bytes each), and the shards they upload. Read
        when a close is asked, when an arrival in the closing run asks again, and at a wait's deadline:
        never on a timer. None: no such run."""
        found = self.get_many(project, run_id, [RUN_SK])
        if not found:
            return None
        run = run_from(found[0], [])
        items = self.query_run(project, run_id, "begins_with(sk, :uploads)", {":uploads": UPLOAD_PREFIX})
        grants = [
            Grant(
                item["shard"],
                item["upload_id"],
                float(item["requested_at"]),
                CiOrigin.from_item(item.get("origin")) or CiOrigin(),
                item.get("label"),
            )
            for item in items
        ]
        # a Query is billed by the bytes it reads (4 KB a unit), a BatchGetItem by the item (4 KB at least)
        shards = (
            self.query_run(project, run_id, "begins_with(sk, :shards)", {":shards": SHARD_PREFIX}) if grants else []
        )
        return BarrierView(run, grants, {s.name: s for s in map(shard_from, shards)})

    def plan_record(self, project: str, run_id: str) -> PlanRecord | None:
        """What the run's item records of its plan (None: not planned, or no such run), in one
        small consistent read of that attribute alone."""
        found = self.get_many(project, run_id, [RUN_SK], (attribute("forward.plan"),))
        plan: PlanRecord | None = field_from("forward.plan", found[0]) if found else None
        return plan


def _read_whole(run: dict[str, Any], known: _Known) -> bool:
    """A run opened again under its id (the first expired), or one that carried shards: its
    carried shards are items beside it, out of the few a changed snapshot reads."""
    return run.get("created_at", "") != known.created_at or carried_count(run) > 0


def _parse(items: list[dict[str, Any]]) -> Snapshot | None:
    found = [item for item in items if item["sk"] == RUN_SK]
    if not found:
        return None

    def of(prefix: str) -> list[dict[str, Any]]:
        return [item for item in items if item["sk"].startswith(prefix)]

    run = run_from(found[0], of(TALLY_PREFIX))
    carried = {i["sk"].removeprefix(CARRIED_PREFIX): json.loads(i["carried"]) for i in of(CARRIED_PREFIX)}
    if carried:
        kept = {name: CarriedShard.from_item(entry) for name, entry in sorted(carried.items())}
        run.outcome = dataclasses.replace(run.outcome, carried=kept)
    parts = of(PART_PREFIX)
    run.announced_parts = {index: Announced.from_json(a) for index, a in _answers(parts, ANNOUNCED).items()}
    run.forwarded_parts = {index: Delivered.from_json(a) for index, a in _answers(parts, FORWARDED_PART).items()}
    return Snapshot(run, {shard.name: shard for shard in map(shard_from, of(SHARD_PREFIX))})


def _answers(parts: list[dict[str, Any]], kind: str) -> dict[str, str]:
    """The upstream's answers of one kind among a run's part items, by upload index."""
    said = {}
    for item in parts:
        _, of_kind, index = item["sk"].split("#", 2)
        if of_kind == kind:
            said[str(int(index))] = item["answer"]
    return said
