"""What the upstream answered for one upload of a run, as the run's part items keep it: the POST's
answer before the PUT (a retry PUTs there), then what reached it. Read and written here only; a
field this release does not know is kept as it came (``stored``)."""

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Self

from .stored import Stored


class _Answer(Stored):
    """Kept as JSON text on its part's item."""

    def to_json(self) -> str:
        return json.dumps(self.to_item())

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_item(json.loads(text))


@dataclass(frozen=True)
class Announced(_Answer):
    """An upload's POST, answered: the upstream run it goes under and where its archive goes."""

    run_id: str
    upload_url: str
    md5: str  # of the archive it announced: other bytes are announced again
    later_fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Delivered(_Answer):
    """An upload the upstream holds: the run it went under, the bytes sent and their MD5."""

    run_id: str | None
    size: int
    md5: str | None
    run_hash: str | None = None  # a tokenless upload's: the sha256 of the POST's bytes CodSpeed received
    later_fields: dict[str, Any] = field(default_factory=dict)

    def to_item(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_item().items() if v is not None or k != "run_hash"}

    def fields(self) -> dict[str, Any]:
        """Its own fields, as a shard's record of its send (``ShardSent``) takes them."""
        return {k: v for k, v in asdict(self).items() if k != "later_fields"}
