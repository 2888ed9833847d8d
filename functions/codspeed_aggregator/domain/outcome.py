"""What a run's end decided, as its record keeps it (``RunRecord.outcome``, and the plan's copy):
the baseline chosen, the shards carried from it, the benchmarks the run lost, those it measured
twice. Read and written here only; a field this release does not know is kept as it came
(``stored``), as the plan's are."""

from dataclasses import dataclass, field
from typing import Any, Self

from codspeed_wire.report import Overlap

from .stored import Stored, decoded, encoded


@dataclass(frozen=True)
class ChosenBaseline(Stored):
    """The run a closing run compares with and carries from, and why it is that one."""

    run_id: str
    commit: str | None
    branch: str
    why: str
    later_fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CarriedShard(Stored):
    """A shard skipped and carried: the run and commit it was measured in, and what it held."""

    run_id: str
    commit: str | None
    branch: str | None = None
    benchmarks: int | None = None
    size: int | None = None
    group: str = ""
    key: str | None = None  # its bundle, where that run kept its results (none: it has none to read)
    left_out: str | None = None  # why a one-upload run's upload does not hold it
    later_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def said(self) -> str:
        return f"carried from run {self.run_id} (commit {(self.commit or '?')[:12]})"

    def to_item(self) -> dict[str, Any]:
        return {k: v for k, v in super().to_item().items() if v is not None or k not in ("key", "left_out")}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        carried: Self = decoded(cls, item, **_counted(item, "benchmarks", "size"))
        return carried


@dataclass(frozen=True)
class Outcome(Stored):
    """Empty while the run is open: its finalizer decides it (``baseline.complete``)."""

    baseline: ChosenBaseline | None = None  # None: no run of the branch to compare with
    carried: dict[str, CarriedShard] = field(default_factory=dict)  # by shard
    missing_benchmarks: tuple[str, ...] = ()  # the first listed (``baseline.first_listed``)
    missing_benchmarks_total: int = 0
    note: str | None = None  # why nothing was carried, when no baseline was found
    overlaps: tuple[Overlap, ...] = ()  # the first listed
    overlaps_total: int = 0
    later_fields: dict[str, Any] = field(default_factory=dict)

    def carried_groups(self) -> list[str]:
        return [c.group for c in self.carried.values()]

    def carried_benchmarks(self) -> int:
        return sum(c.benchmarks or 0 for c in self.carried.values())

    def to_item(self) -> dict[str, Any]:
        return encoded(
            self,
            baseline=self.baseline.to_item() if self.baseline else None,
            carried={name: c.to_item() for name, c in self.carried.items()},
            missing_benchmarks=list(self.missing_benchmarks),
            overlaps=[o.model_dump() for o in self.overlaps],
        )

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        missing = tuple(item.get("missing_benchmarks") or ())
        outcome: Self = decoded(
            cls,
            item,
            baseline=ChosenBaseline.from_item(item["baseline"]) if item.get("baseline") else None,
            carried={name: CarriedShard.from_item(c) for name, c in (item.get("carried") or {}).items()},
            missing_benchmarks=missing,
            missing_benchmarks_total=int(item.get("missing_benchmarks_total", len(missing))),
            overlaps=tuple(Overlap.model_validate(o) for o in item.get("overlaps") or ()),
            overlaps_total=int(item.get("overlaps_total", 0)),
        )
        return outcome


def _counted(item: dict[str, Any], *names: str) -> dict[str, int | None]:
    """Counts as DynamoDB gives them back (a ``Decimal``), as ints."""
    return {name: None if item.get(name) is None else int(item[name]) for name in names}
