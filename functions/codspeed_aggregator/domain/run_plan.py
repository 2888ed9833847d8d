"""A run's forward plan as it is kept: the claiming finalizer's whole plan (``RunPlan``, in S3 at
``keys.plan_key``) and what the run item records of it (``PlanRecord``, in DynamoDB). Each is read
and written here only. A field this release does not know is kept as it came, so that a release
rolled back reads a newer plan, and writes it back whole (``stored``)."""

from dataclasses import asdict, dataclass, field
from typing import Any, Self

from .outcome import Outcome
from .records import ShardRecord
from .stored import Stored, decoded, encoded
from .upstream_parts import UpstreamPart


@dataclass(frozen=True)
class RunPlan(Stored):
    """What a run forwards, decided once by its claiming finalizer: read back by every finalizer of
    the run (each part's, when it has no slice of its own) and by the run's next attempt."""

    baseline: str | None  # the run its skipped shards are carried from
    uploads: list[UpstreamPart]
    ids: list[str]  # what each upload holds (``upstream_parts.part_id``)
    held: dict[str, str]  # an upload's key -> what the upstream holds of it, from an earlier attempt or a shard's send
    todo: list[int]  # the uploads this attempt sends
    outcome: Outcome  # the run's completion (``baseline.complete``): carried shards, missing benchmarks
    # the shards it forwards, arrived and carried, as they were counted, so that a part's finalizer
    # reads no shard item
    shards: dict[str, ShardRecord]
    carried: list[str]  # the shards among them carried from the baseline
    first: str | None  # the shard that arrived first: its metadata is the run's
    later_fields: dict[str, Any] = field(default_factory=dict)

    def to_item(self) -> dict[str, Any]:
        return encoded(
            self,
            uploads=[u.to_item() for u in self.uploads],
            shards={name: asdict(s) for name, s in self.shards.items()},
            outcome=self.outcome.to_item(),
        )

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        plan: Self = decoded(
            cls,
            item,
            uploads=[UpstreamPart.from_item(u) for u in item["uploads"]],
            shards={name: ShardRecord.from_item(s) for name, s in item["shards"].items()},
            outcome=Outcome.from_item(item["outcome"]),
        )
        return plan
