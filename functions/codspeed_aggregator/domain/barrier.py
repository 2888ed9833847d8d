"""A close is a barrier: a run is finalized only once every upload granted before it has arrived, or
is known not to be coming. An upload URL is good for ``expiry`` seconds after its grant; S3's event of
a bundle PUT comes seconds after it (``grace`` bounds how long one already in the bucket is awaited,
so that no run waits forever on an event that never comes)."""

from dataclasses import dataclass

from .ledger import ARRIVED, LATE, REJECTED, RunRecord, ShardRecord

COUNTED = (ARRIVED, REJECTED, LATE)
# how long a bundle already in the bucket is awaited past its URL's expiry: S3's event comes seconds after
# the PUT, and an arrival that failed is retried within minutes
EVENT_GRACE_SECONDS = 300


@dataclass(frozen=True)
class Grant:
    """An upload granted in a run (its ``UPLOAD#`` item)."""

    shard: str  # the shard key it uploads
    upload_id: str
    granted_at: float


@dataclass(frozen=True)
class BarrierView:
    """What the barrier reads: the run's own record (read first), the grants young enough to be
    awaited, and the shards they upload."""

    run: RunRecord
    grants: list[Grant]
    shards: dict[str, ShardRecord]


@dataclass(frozen=True)
class Awaited:
    """The grants a close still waits for, and until when at the latest (the epoch second)."""

    grants: tuple[Grant, ...]
    until: float

    def __bool__(self) -> bool:
        return bool(self.grants)


def pending(grants: list[Grant], shards: dict[str, ShardRecord]) -> list[Grant]:
    """The grants whose shard has nothing counted yet (a shard already in is not waited for again: a
    re-run of it that lands after the run is finalized counts in its next attempt)."""
    counted = {name for name, shard in shards.items() if shard.state in COUNTED}
    return [g for g in grants if g.shard not in counted]


def awaited(pending: list[Grant], in_bucket: set[str], now: float, expiry: int, grace: int) -> Awaited:
    """Of the pending grants, those still awaited: one whose URL is good (its PUT may be under way),
    or whose bundle is in the bucket and whose event may still come (``grace`` after its URL expired).
    One whose URL expired with nothing in the bucket is not coming."""
    waiting = [
        g
        for g in pending
        if now < g.granted_at + expiry or (g.upload_id in in_bucket and now < g.granted_at + expiry + grace)
    ]
    until = max((g.granted_at + expiry + (grace if g.upload_id in in_bucket else 0) for g in waiting), default=now)
    return Awaited(tuple(waiting), until)
