"""A close is a barrier: a run is finalized once nothing it is owed can still come.

A close from a gate or the CI's webhook says "the jobs of this CI run and attempt have ended"
(``CiOrigin``). A job's PUT is one request, and S3 lists an object once its PUT was answered, so
a grant of one of those jobs with no bundle in the bucket is not coming: missing at once. A grant
the close cannot tell as its own (another workflow sharing the run id, a CI that names no run),
and every grant at a deadline, is awaited while its URL is good. A bundle in the bucket is awaited
until its arrival is counted: its arrival asks the finalize again, and one backstop sized to the
bundle bounds the wait, past which the close hands the arrival over itself."""

from collections.abc import Callable
from dataclasses import dataclass, field

from codspeed_rules.names import Shown

from .closing import CiOrigin
from .records import ARRIVED, LATE, REJECTED, RunRecord, ShardRecord
from .report import shown_as

COUNTED = (ARRIVED, REJECTED, LATE)
# S3's event of a PUT reaches the arrivals queue within seconds; a minute covers its batching and a
# cold start. The arrival's own time (``Settings.arrival_reserve``) comes on top, sized to the bundle.
EVENT_SECONDS = 60


@dataclass(frozen=True)
class Grant:
    """An upload granted in a run (its ``UPLOAD#`` item)."""

    shard: str  # the shard key it uploads
    upload_id: str
    granted_at: float
    origin: CiOrigin = field(default_factory=CiOrigin)
    label: str | None = None  # a runner job's name, as the run shows it

    @property
    def name(self) -> Shown:
        """The shard as its readers know it (a runner job as its CI shows it), never its key."""
        return shown_as(self.shard, self.label)


@dataclass(frozen=True)
class BarrierView:
    """What the barrier reads: the run's own record (read first), the grants young enough to be
    awaited, and the shards they upload."""

    run: RunRecord
    grants: list[Grant]
    shards: dict[str, ShardRecord]


@dataclass(frozen=True)
class Landed:
    """A grant's bundle as the bucket lists it."""

    size: int
    at: float  # when its PUT was answered (LastModified)


@dataclass(frozen=True)
class Wait:
    """One grant a close still waits for, and until when (the epoch second); ``landed``: the time its
    bundle is in the bucket since, None while its URL is good and its PUT may still come."""

    grant: Grant
    until: float
    landed: float | None = None


@dataclass(frozen=True)
class Verdict:
    """What the barrier decided: the grants it waits for (the earliest deadline first), and the bundles
    in the bucket whose arrival is overdue (the close counts them itself)."""

    waits: tuple[Wait, ...] = ()
    overdue: tuple[Grant, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.waits)

    @property
    def next_look(self) -> float:
        """When to look again without an arrival asking: the earliest deadline of a wait."""
        return min(w.until for w in self.waits)

    @property
    def until(self) -> float:
        """The latest moment the close can wait."""
        return max(w.until for w in self.waits)


def pending(grants: list[Grant], shards: dict[str, ShardRecord], given_up: frozenset[str] = frozenset()) -> list[Grant]:
    """The grants whose shard has nothing counted yet (a shard already in is not waited for again: a
    re-run of it that lands after the run is finalized counts in its next attempt), and whose bundle
    the close did not give up on (``given_up``: its arrival failed when the close handed it over)."""
    counted = {name for name, shard in shards.items() if shard.state in COUNTED}
    return [g for g in grants if g.shard not in counted and g.shard not in given_up]


def judge(
    pending: list[Grant],
    landed: dict[str, Landed],
    close: CiOrigin | None,
    now: float,
    expiry: int,
    backstop: Callable[[int], float],
) -> Verdict:
    """Of the pending grants, what the close waits for. ``landed``: their bundles in the bucket, by
    upload id; ``close``: the CI run and attempt the close speaks for (None: a deadline, or a close from
    outside any CI); ``backstop``: the seconds a bundle of a size may take to be counted once in the bucket
    (``EVENT_SECONDS`` and the arrival's own time)."""
    waits, overdue = [], []
    for grant in pending:
        bundle = landed.get(grant.upload_id)
        if bundle is not None:
            until = bundle.at + backstop(bundle.size)
            if now < until:
                waits.append(Wait(grant, until, bundle.at))
            else:
                overdue.append(grant)
        elif not grant.origin.ended_by(close) and now < grant.granted_at + expiry:
            waits.append(Wait(grant, grant.granted_at + expiry))
        # else: its job ended (or its URL expired) with nothing in the bucket: not coming
    return Verdict(tuple(sorted(waits, key=lambda w: w.until)), tuple(overdue))
