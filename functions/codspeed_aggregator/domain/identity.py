"""What every shard of one run agrees on: its commit, its project and its ref, named as CodSpeed's
metadata names them (``UploadMetadata.identity``), and the refusal of a shard that says otherwise."""

import json
from dataclasses import dataclass
from typing import Any, Self

from .errors import Conflict


@dataclass(frozen=True)
class RunIdentity:
    commit_hash: str
    owner: str | None
    repository: str | None
    ref: str | None

    @classmethod
    def of(cls, said: dict[str, Any]) -> Self:
        """From the metadata's fields (``UploadMetadata.identity``), or a run item's copy of them."""
        return cls(said["commitHash"], said.get("owner"), said.get("repository"), said.get("ref"))

    def said(self) -> dict[str, str | None]:
        """Its fields, as the metadata names them."""
        return {"commitHash": self.commit_hash, "owner": self.owner, "repository": self.repository, "ref": self.ref}

    def first_difference(self, other: "RunIdentity") -> tuple[str, str | None, str | None] | None:
        """The first field ``other`` says otherwise, as the metadata names it: (name, other's, this one's)."""
        theirs = other.said()
        return next(((name, theirs[name], mine) for name, mine in self.said().items() if theirs[name] != mine), None)

    def to_json(self) -> str:
        return json.dumps(self.said(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Self | None:
        """A run item's copy (``null``: a run that has none)."""
        said = json.loads(text) if text else None
        return cls.of(said) if said else None


def check_identity(run_identity: RunIdentity | None, mine: RunIdentity | None) -> None:
    """Refuse a shard whose commit, project or ref differs from the run's first shard."""
    if run_identity is None or mine is None:
        return
    if found := run_identity.first_difference(mine):
        field, said, value = found
        raise Conflict(
            f"metadata field {field} is {said!r} in this shard but {value!r} in the run: "
            "every shard of a run must agree on it"
        )
