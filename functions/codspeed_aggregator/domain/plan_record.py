"""What a run's own item records of its plan (the whole plan is in S3: ``run_plan``): apart from the plan,
so that the run record, which holds it, needs nothing of the plan's shards."""

from dataclasses import dataclass, field
from typing import Any

from .stored import Stored


@dataclass(frozen=True)
class PlanRecord(Stored):
    """What the run item says of its plan: enough for every finalizer of the run to find the rest."""

    baseline: str | None  # the run its skipped shards are carried from
    parts: int  # the uploads the plan holds
    sends: int  # those of them this attempt sends (the others the upstream holds from an earlier one)
    version: str | None = None  # the whole plan's S3 version (None: not written yet)
    parts_at: str | None = None  # where each part's slice is (``keys.part_plan_key``): written when several send
    later_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def written(self) -> bool:
        """The whole plan is in S3: a retry and a later attempt read it, not plan again."""
        return self.version is not None
