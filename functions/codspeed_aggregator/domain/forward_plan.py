"""A run's forward plan, decided once by its claiming finalizer, and the slice of it one part's
finalizer needs: its upload, its own shards, what of them was carried, and the run's metadata."""

from dataclasses import asdict, dataclass
from typing import Any

from codspeed_rules.summary import plural

from .baseline import Completion
from .metadata import part_claim
from .outcome import CarriedShard
from .part_answers import Delivered
from .records import RunRecord, ShardRecord, sent_as
from .upstream_parts import UpstreamPart


@dataclass(frozen=True)
class PartPlan:
    """One upload of a run forwarded in several: all its finalizer reads (never the whole plan)."""

    index: int
    upload: UpstreamPart
    part_id: str  # what it holds (``upstream_parts.part_id``): a shard a parts run sent as it is now is not sent again
    shards: dict[str, ShardRecord]  # its own, by name
    carried: dict[str, CarriedShard]  # the outcome's entry of each of its shards carried from the baseline
    number: int  # its place among its group's merged parts (0: a shard sent as it was)
    group_parts: int  # its group's merged parts
    sends: int  # how many uploads this attempt sends
    base_metadata: dict[str, Any] | None  # the run's CodSpeed metadata (its first shard's)

    @property
    def claim(self) -> str:
        """What its finalizer claims it under: its runPartId (``metadata.part_claim``), shared with an
        parts run's send of the same shard."""
        return part_claim(self.upload, self.shards)

    def to_item(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "upload": self.upload.to_item(),
            "id": self.part_id,
            "shards": {name: asdict(s) for name, s in self.shards.items()},
            "carried": {name: c.to_item() for name, c in self.carried.items()},
            "number": self.number,
            "group_parts": self.group_parts,
            "sends": self.sends,
            "base_metadata": self.base_metadata,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "PartPlan":
        return cls(
            index=item["index"],
            upload=UpstreamPart.from_item(item["upload"]),
            part_id=item["id"],
            shards={name: ShardRecord.from_item(s) for name, s in item["shards"].items()},
            carried={name: CarriedShard.from_item(c) for name, c in item["carried"].items()},
            number=item["number"],
            group_parts=item["group_parts"],
            sends=item["sends"],
            base_metadata=item["base_metadata"],
        )


@dataclass(frozen=True)
class ForwardPlan:
    run: RunRecord
    shards: dict[str, ShardRecord]  # arrived and carried, by name
    completion: Completion
    baseline_run: str | None
    base_metadata: dict[str, Any] | None
    uploads: list[UpstreamPart]
    part_ids: list[str]  # what each upload holds (``upstream_parts.part_id``)
    todo: list[int]  # the uploads this attempt sends: the others the upstream holds, as they are, from an earlier one

    def part(self, index: int) -> PartPlan:
        upload = self.uploads[index]
        merged = [u for u in self.uploads if u.merged and u.group == upload.group]
        carried = self.completion.outcome.carried
        return PartPlan(
            index=index,
            upload=upload,
            part_id=self.part_ids[index],
            shards={name: self.shards[name] for name in upload.shards},
            carried={name: carried[name] for name in upload.shards if name in self.completion.carried},
            number=merged.index(upload) + 1 if upload.merged else 0,
            group_parts=len(merged),
            sends=len(self.todo),
            base_metadata=self.base_metadata,
        )

    def outcome_said(self, parts: list[Delivered]) -> tuple[str, "UpstreamRuns"]:
        """What the run's end says it sent (``parts``: the upstream's answers to this attempt's
        sends), and the upstream run ids it went under."""
        size = sum(p.size for p in parts)
        run_ids = [p.run_id for p in parts if p.run_id]
        if self.run.forward.sends_parts:  # each shard its own part as it landed: nothing merged, nothing carried sent
            message = self._parts_said(len(parts), size)
            run_ids += self._shards_sent_under()
        else:
            message = f"{len(self.shards)} shards merged, {size} bytes" + (
                f", in {len(parts)} uploads" if len(parts) > 1 else ""
            )
            if held := len(self.uploads) - len(self.todo):
                message += f"; {held} part{'s' if held > 1 else ''} the upstream holds already, not sent again"
        return message, UpstreamRuns(list(dict.fromkeys(run_ids)))

    def _parts_said(self, sent: int, size: int) -> str:
        """A parts run's end: its shards each their own part (``sent`` of them at the end), its carried
        ones left to CodSpeed's baseline."""
        carried = len(self.completion.carried)
        if measured := len(self.shards) - carried:
            message = f"{plural(measured, 'shard')}, each its own part upstream" + (
                f" ({sent} sent at the end, {size} bytes)" if sent else ""
            )
        else:
            message = "nothing measured on this commit: one part with no benchmark (allowEmpty)"
        return message + (f"; {carried} carried, left to CodSpeed's baseline" if carried else "")

    def _shards_sent_under(self) -> list[str]:
        """The upstream runs a parts run's shards went under as they landed (a shard carried from the
        baseline was sent by that run)."""
        return [
            s.upstream.run_id
            for name, s in self.shards.items()
            if name not in self.completion.carried and sent_as(s) and s.upstream and s.upstream.run_id
        ]


MAX_RUN_IDS_LISTED = 20  # on the run item, within MAX_RUN_IDS_BYTES: the rest is in S3 (keys.upstream_runs_key)
MAX_RUN_IDS_BYTES = 2048


@dataclass(frozen=True)
class UpstreamRuns:
    """The distinct upstream runs a run's parts went under: one when the upstream combines them
    (CodSpeed: the CI run's), else as many as its parts, which the caps allow by the hundred
    thousand. The run item lists the first of them and counts them all, so it never grows with
    the parts; the whole list goes to S3 when the item cannot hold it."""

    distinct: list[str]

    @property
    def kept(self) -> list[str]:
        """Those the run item lists: every one, up to 20 within 2 KiB, else the first that fit."""
        kept, size = [], 0
        for run_id in self.distinct[:MAX_RUN_IDS_LISTED]:
            size += len(run_id.encode()) + 1
            if size > MAX_RUN_IDS_BYTES:
                break
            kept.append(run_id)
        return kept

    @property
    def overflow(self) -> bool:
        """Whether the item lists fewer than all (the whole list is then written to S3)."""
        return len(self.kept) < len(self.distinct)

    def said(self) -> dict[str, Any]:
        """Its fields in the run's ``upstream``: ``run_ids`` (how many) beside ``run_id`` when it is not all."""
        kept = self.kept
        listed = {"run_id": ",".join(kept) or None}
        return listed | ({"run_ids": len(self.distinct)} if len(kept) < len(self.distinct) else {})
