"""Which shards a run expects: a count, a list of names, or nothing said (closed by hand)."""

from dataclasses import dataclass
from typing import Any

from .errors import Conflict, Unprocessable


@dataclass(frozen=True)
class Manifest:
    total: int | None = None
    names: tuple[str, ...] | None = None
    indexed: bool = False  # shards named "1".."total" (`--shard 2/4`)

    @classmethod
    def from_item(cls, item: dict[str, Any] | None) -> "Manifest":
        if not item:
            return cls()
        names = item.get("names")
        return cls(
            total=int(item["total"]) if item.get("total") is not None else None,
            names=tuple(names) if names else None,
            indexed=bool(item.get("indexed", False)),
        )

    def to_item(self) -> dict[str, Any]:
        return {"total": self.total, "names": list(self.names) if self.names else None, "indexed": self.indexed}

    @property
    def said(self) -> bool:
        return self.total is not None or self.names is not None

    def expected_count(self) -> int | None:
        return len(self.names) if self.names is not None else self.total

    def expected_names(self) -> tuple[str, ...] | None:
        if self.names is not None:
            return self.names
        if self.indexed and self.total:
            return tuple(str(i) for i in range(1, self.total + 1))
        return None

    def describe(self) -> str:
        if self.names is not None:
            return "shards " + ",".join(self.names)
        if self.total is not None:
            return f"{self.total} shard{'s' if self.total != 1 else ''}"
        return "no manifest"

    def admit(self, shard: str) -> None:
        """Refuse a shard this manifest cannot hold."""
        expected = self.expected_names()
        if expected is not None and shard not in expected:
            raise Unprocessable(f"shard '{shard}' is not in the run's manifest ({self.describe()})")

    def agree(self, first: "Manifest", group: str = "") -> None:
        """A shard that states a manifest must state its group's first one."""
        if self.said and self != first:
            where = f"job {group} of the run" if group else "the run"
            raise Conflict(
                f"manifest mismatch: this shard expects {self.describe()}, "
                f"but {where} was opened expecting {first.describe()}; it keeps its first manifest"
            )

    def is_complete_count(self, arrived: int, variants: int = 1) -> bool:
        """Complete by count alone: shards outside the manifest are refused before they upload.
        A CodSpeed runner's job uploads once per variant (executor, run index), so a count
        manifest expects its total once for every variant seen."""
        expected = self.expected_count()
        return expected is not None and arrived >= expected * max(1, variants)
