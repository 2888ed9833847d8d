"""What a close speaks for and what it waits for, as a run records them."""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from codspeed_rules.names import Shown


@dataclass(frozen=True)
class CiOrigin:
    """The CI run (GitHub's run id, GitLab's pipeline, CircleCI's workflow, Buildkite's build) and
    attempt a grant came from, or that a close speaks for; None where it is not known."""

    run: str | None = None
    attempt: int | None = None
    workflow: bool = False  # a close only: the CI's webhook said every job of that attempt ended, not a gate

    def ended_by(self, close: "CiOrigin | None") -> bool:
        """A grant whose job ``close`` says has ended: its CI run is the close's, in an attempt no later
        than the close's. An attempt unknown on either side is the run's: GitHub re-runs a workflow only
        once all its jobs ended, and a gate runs after the jobs it needs."""
        if close is None or self.run is None or self.run != close.run:
            return False
        return self.attempt is None or close.attempt is None or self.attempt <= close.attempt

    def to_item(self) -> dict[str, str | int | bool]:
        said = {k: v for k, v in (("run", self.run), ("attempt", self.attempt)) if v is not None}
        return said | ({"workflow": True} if self.workflow else {})

    @classmethod
    def from_item(cls, item: dict[str, Any] | None) -> "CiOrigin | None":
        if not item:
            return None
        return cls(item.get("run"), int(item["attempt"]) if item.get("attempt") else None, bool(item.get("workflow")))


@dataclass(frozen=True)
class Awaiting:
    """What a closing run waits for, said to its readers: the first shard awaited, since when its
    bundle is in the bucket (None: its URL is good, its PUT may come), how many are awaited, and the
    latest moment the wait can last (epoch seconds)."""

    shard: Shown  # stored as shown
    landed: float | None
    count: int
    until: float

    def to_item(self) -> dict[str, str | int]:
        item: dict[str, str | int] = {"shard": self.shard, "count": self.count, "until": int(self.until)}
        return item | ({"landed": int(self.landed)} if self.landed is not None else {})

    @classmethod
    def from_item(cls, item: dict[str, Any] | None) -> "Awaiting | None":
        if not item:
            return None
        landed = item.get("landed")
        return cls(
            Shown(str(item["shard"])),
            float(landed) if landed is not None else None,
            int(item["count"]),
            float(item["until"]),
        )

    def said(self) -> str:
        """The wait in a sentence, as the report, the comment, the page and ``status`` say it: the shard
        by the name its readers know it by (``shard`` is stored as shown), the time once."""
        what = (
            f"shard {self.shard}'s bundle, in the bucket since {_time(self.landed)}, to be counted"
            if self.landed is not None
            else f"shard {self.shard}'s upload, whose URL was handed out before the close"
        )
        more = f" and {self.count - 1} more" if self.count > 1 else ""
        return f"closing: waiting for {what}{more}; {_time(self.until)} UTC at the latest"


@dataclass(frozen=True)
class RunClose:
    """A run's close: whether one was asked (``requested``; the run is finalized once nothing it is owed
    can still come), the CI run and attempt it speaks for (``by``; None: a deadline, or no CI), and what
    it waits for, as its readers are told (``awaiting``). The ledger's ``Closes`` writes it."""

    requested: bool = False
    by: CiOrigin | None = None
    awaiting: Awaiting | None = None


# Said from the close until its barrier records a wait, and while it has found nothing to wait for: the run
# ends in moments then, and before the barrier looked (its LIST failing, say) nothing is known to be coming or not.
CLOSING_UNDECIDED = "closing: the run ends once what was uploaded before the close is counted"


def closing_said(closing: bool, awaiting: Awaiting | None) -> str | None:
    """What an open run's readers are told of its close: None before any close."""
    if not closing:
        return None
    return awaiting.said() if awaiting else CLOSING_UNDECIDED


def _time(epoch: float | None) -> str:
    return datetime.fromtimestamp(epoch or 0, UTC).strftime("%H:%M:%S")
