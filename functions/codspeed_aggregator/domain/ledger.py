"""The records a run is made of, as the ledger (DynamoDB) stores them.

Every change bumps a revision counter: ``run.rev`` counts all changes to the run,
``run.run_changes`` those made to the run record itself and ``shard.rev`` those made to
one shard. A read sees one instant of the run exactly when
``run.rev == run.run_changes + sum(shard.rev)``; reports are built only from such
reads, and ``run.rev`` is their version, so a later version never shows less.
"""

from dataclasses import dataclass, field

from .manifest import Manifest

OPEN, FINALIZING, FORWARDED, FORWARD_FAILED, CLOSED_EMPTY = (
    "open", "finalizing", "forwarded", "forward_failed", "closed_empty",
)
ARRIVED, REJECTED, LATE = "arrived", "rejected", "late"
ENDED = (FINALIZING, FORWARDED, FORWARD_FAILED, CLOSED_EMPTY)  # an upload for such a run starts its next attempt


def attempt_run_id(run_id: str, attempt: int) -> str:
    """The run id of a run's later attempt ('~' is in no run id a client can give)."""
    return run_id if attempt == 1 else f"{run_id}~{attempt}"


@dataclass
class RunRecord:
    project: str
    run_id: str
    manifest: Manifest
    state: str = OPEN
    commit: str | None = None
    ref: str | None = None
    base_ref: str | None = None
    identity: dict | None = None
    created_at: str = ""
    deadline_at: int = 0
    rev: int = 1
    run_changes: int = 1
    skipped: tuple[str, ...] = ()
    close_reason: str | None = None
    upstream: dict | None = None
    forward_error: str | None = None
    lease_until: int = 0
    arrived_count: int = 0  # distinct shards with an accepted bundle, kept exact by the arrival's condition
    forwarded_parts: dict = field(default_factory=dict)  # upload index -> the upstream's answer
    announced_parts: dict = field(default_factory=dict)  # upload index -> POST answered, PUT maybe not done
    outcome: dict = field(default_factory=dict)  # baseline, carried shards, missing benchmarks (domain.baseline)
    attempt: int = 1  # a run forwarded and uploaded to again (a CI re-run) goes on as its next attempt
    variants: tuple[str, ...] = ()  # of CodSpeed runner uploads: the manifest's total is per variant
    closing: bool = False  # a close was accepted: no more uploads are granted
    ci_url: str | None = None
    plan: dict | None = None  # the claiming finalizer's: {"baseline": run id or None, "parts": uploads}

    def complete(self, arrived: int) -> bool:
        return self.manifest.is_complete_count(arrived, len(self.variants))


@dataclass
class ShardRecord:
    name: str
    state: str
    attempt: int = 0
    upload_id: str | None = None
    key: str | None = None
    size: int | None = None
    benchmarks: int | None = None
    benchmark_names: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    arrived_at: str | None = None
    reason: str | None = None
    rev: int = 0
    noted_upload: str | None = None  # the last upload noted as rejected or late (not counted)
    requested_at: str | None = None  # when the counted upload was granted: a later one replaces it
    label: str | None = None  # what the uploader called it (a CodSpeed runner's runPartId), when not its name
    executor: str = "valgrind"
    gzipped: bool = True
    inherited_from: str | None = None  # the earlier attempt this shard's bundle was counted in
    version_id: str | None = None  # the object version validated: the one merged
    results: dict = field(default_factory=dict)  # benchmark -> its figures (domain.results), read with the names
    normalized: dict | None = None  # the normalized copy (key, version: the bundle itself when verified) and its index version


@dataclass
class UploadRecord:
    shard: str
    upload_id: str
    size: int | None
    requested_at: str
    metadata: dict | None = None  # stored beside the record, read only when forwarding
    label: str | None = None
    executor: str = "valgrind"


@dataclass
class Snapshot:
    run: RunRecord
    shards: dict[str, ShardRecord]

    def consistent(self) -> bool:
        return self.run.rev == self.run.run_changes + sum(s.rev for s in self.shards.values())

    def arrived(self) -> dict[str, ShardRecord]:
        return {name: s for name, s in self.shards.items() if s.state == ARRIVED}

    def complete(self) -> bool:
        return self.run.manifest.is_complete(set(self.arrived()), len(self.run.variants))


@dataclass
class ArrivalView:
    """What one arrival reads: its run, its shard (None before a first upload) and its upload request."""

    run: RunRecord | None
    shard: ShardRecord | None
    upload: UploadRecord | None

    def complete(self) -> bool:
        return self.run.complete(self.run.arrived_count)
