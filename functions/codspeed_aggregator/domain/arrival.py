"""What an arrival (a bundle's S3 event) reads, and what became of it."""

from dataclasses import dataclass
from enum import StrEnum

from .records import GrantRecord, RunRecord, ShardRecord


class Counted(StrEnum):
    """What the ledger answers a bundle's count: done, the shard no longer as read (read it again),
    or the run no longer taking shards (its next attempt does)."""

    RECORDED = "recorded"
    CHANGED = "changed"
    RUN_NOT_OPEN = "run_not_open"


class Arrival(StrEnum):
    """What became of an arrival (an object's S3 event), each with the metric that counts it."""

    RECORDED = "recorded"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"
    LATE = "late"
    IGNORED = "ignored"

    @property
    def metric(self) -> str:
        return {
            "recorded": "ShardsCounted",
            "duplicate": "DuplicatesAbsorbed",
            "rejected": "BundlesRejected",
            "late": "LateBundles",
            "ignored": "ObjectsIgnored",
        }[self.value]


@dataclass
class ArrivalView:
    """What one arrival reads: its run, its shard (None before a first upload) and its upload request."""

    run: RunRecord | None
    shard: ShardRecord | None
    upload: GrantRecord | None


def given_back(upload_id: str) -> str:
    """What a shard notes of a grant its client gave back: apart from the upload itself, whose bundle,
    should it land all the same, still counts (``~`` is in no upload id, which are hex)."""
    return f"{upload_id}~given-back"
