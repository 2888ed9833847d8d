"""The records a run is made of, as the ledger (DynamoDB) stores them.

Every change bumps a revision counter: ``run.rev`` counts all changes to the run,
``run.run_changes`` those made to the run record itself and ``shard.rev`` those made to
one shard (each counted, where the ledger stores it, in the same write as the shard's change).
A read sees one instant of the run exactly when ``run.rev == run.run_changes + sum(shard.rev)``;
reports are built only from such reads, and ``run.rev`` is their version, so a later version
never shows less.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from codspeed_rules.names import KEYED_AS_NAME

from .attempts import RunAttempt
from .closing import CiOrigin, RunClose
from .forwarding import RunForward
from .identity import RunIdentity
from .manifest import Manifest
from .outcome import Outcome
from .part_answers import Announced, Delivered

OPEN, FINALIZING, FORWARDED = "open", "finalizing", "forwarded"
FORWARD_FAILED, CLOSED_EMPTY = "forward_failed", "closed_empty"
ARRIVED, REJECTED, LATE = "arrived", "rejected", "late"
ENDED = (FINALIZING, FORWARDED, FORWARD_FAILED, CLOSED_EMPTY)  # an upload for such a run starts its next attempt
OPENED = "opened"  # where an opened run keeps the metadata its CI job stated, as an upload keeps its own (never a uuid)


# What a run's own item holds grows with these, bounded so that it stays far under DynamoDB's 400 KB
MAX_GROUPS = 100  # job groups (a CodSpeed workflow's jobs, a matrix one): as many as ``open`` declares
MAX_VARIANTS = 300  # kinds of upload over all its groups (an executor, a runner's run index): 3 a job


def variant_key(group: str, variant: str) -> str:
    """A kind of upload (``domain.drop_in``'s variant) within one job group."""
    return f"{group}|{variant}"


@dataclass
class RunRecord:
    """A run (one attempt of it). A run is a set of job groups, each with its own manifest: a
    client's ``--shard I/N`` or ``--expect`` is the group "", a CodSpeed workflow's jobs are one
    group per job name (a matrix, or a plain job: a group of one). The run is complete when
    every group seen is."""

    project: str
    run_id: str
    groups: dict[str, Manifest]
    state: str = OPEN
    commit: str | None = None  # what was benchmarked, as CodSpeed's runner says it: on a pull request, the merge commit
    # what people are shown: a pull request's head where ``commit`` is GitHub's merge commit of it (its status)
    head_commit: str | None = None
    ref: str | None = None
    base_ref: str | None = None
    base_commit: str | None = None  # the base branch's commit the change was built on: its run is the baseline
    base_ancestors: tuple[str, ...] = ()  # its first-parent ancestors, the nearest first: else the nearest with a run
    identity: RunIdentity | None = None
    created_at: str = ""
    deadline_at: int = 0
    rev: int = 1
    run_changes: int = 1
    skipped: tuple[str, ...] = ()
    arrived_count: int = 0  # distinct shards with an accepted bundle, kept exact by the arrival's condition
    forwarded_parts: dict[str, Delivered] = field(default_factory=dict)  # upload index -> what reached the upstream
    announced_parts: dict[str, Announced] = field(default_factory=dict)  # upload index -> POST answered, PUT maybe not
    outcome: Outcome = field(default_factory=Outcome)  # decided at its end (``baseline.complete``)
    attempt: RunAttempt = field(default_factory=RunAttempt)
    variants: tuple[str, ...] = ()  # variant_key()s: a group's total is per variant it uploads (executor, run index)
    group_counts: dict[str, int] = field(default_factory=dict)  # distinct shards accepted, per group (exact)
    close: RunClose = field(default_factory=RunClose)
    forward: RunForward = field(default_factory=RunForward)
    given_up: dict[str, str] = field(default_factory=dict)  # shard -> why its bundle in the bucket was not counted
    grants: int = 0  # uploads granted in it (``Closes.count_grant``): the close's barrier claims the run at this count
    tokenless: bool = False  # an upload of it came without a token, unchecked: no comment, no baseline
    fork: bool = False  # opened by a fork's pull request without a token, as GitHub bore it out: no baseline
    provider: str | None = None  # where the repository lives, as its metadata says (GITHUB, GITLAB): whom to notify
    ci_url: str | None = None
    declared: bool = False  # opened by ``codspeed-client open``: its groups are all it takes, no other is added

    def awaits_rerun(self, arrived: Iterable["ShardRecord"], counted_before: set[str]) -> bool:
        """A next attempt still waiting for its re-run: a group (of one executor) in which it counted a
        shard again (one the attempt before had counted, ``counted_before``) still has a shard only that
        attempt counted (``inherited_from``). "Re-run all jobs" completes it by count; "re-run failed jobs"
        re-runs some shards, and the run cannot tell which, so its close (the workflow's close job, the
        webhook, the deadline) forwards it. A shard the attempt before lacked (a crashed job re-run, a late
        group or executor) completes it alone: its inherited shards never do."""
        if not self.attempt.rerun:
            return False
        shards = list(arrived)
        again = {(s.group, s.executor) for s in shards if not s.inherited_from and s.name in counted_before}
        return any(s.inherited_from and (s.group, s.executor) in again for s in shards)

    def ci_attempt_said(self) -> int | None:
        """The CI attempt this aggregator attempt is, as the CI said it: the one that opened it (a job's
        OIDC claim, GitHub's answer for a fork's run, the client's ``GITHUB_RUN_ATTEMPT``), else the one
        its close spoke for. None where the CI said neither (a static token, a close from outside CI)."""
        by = self.close.by
        return self.attempt.ci or (by.attempt if by and by.run else None)

    def variants_of(self, group: str) -> int:
        return sum(1 for v in self.variants if v.partition("|")[0] == group)

    def complete(self) -> bool:
        """Every group seen has all its shards (outside its manifest they are refused at upload),
        its shards skipped on purpose aside (a push of one is refused: ``codspeed-client open``)."""
        return bool(self.groups) and all(
            manifest.is_complete_count(
                self.group_counts.get(group, 0) + self.skipped_in(group, manifest), self.variants_of(group)
            )
            for group, manifest in self.groups.items()
        )

    def skipped_in(self, group: str, manifest: Manifest) -> int:
        """How many of a group's shards are skipped (the client's group only: skips name its shards),
        once for each executor the group holds (a skip carries each executor's shard of that name)."""
        if group != "":
            return 0
        return len(set(self.skipped) & set(manifest.expected_names() or ())) * max(1, self.variants_of(group))

    def executors_of(self, group: str) -> tuple[str, ...]:
        """The executors a group's pushed shards came from, valgrind's first (none said: valgrind)."""
        said = {v.partition("|")[2].partition("/")[0] for v in self.variants if v.partition("|")[0] == group}
        return tuple(sorted(said, key=lambda e: (e != KEYED_AS_NAME, e))) or (KEYED_AS_NAME,)

    def expected_count(self) -> int | None:
        counts = {g: m.expected_count() for g, m in self.groups.items()}
        known = {g: c for g, c in counts.items() if c is not None}
        if not counts or len(known) < len(counts):
            return None
        return sum(c * max(1, self.variants_of(g)) for g, c in known.items())

    def base_commits(self) -> tuple[str, ...]:
        """Where the baseline is looked for: the change's base commit, then its ancestors."""
        return (self.base_commit, *self.base_ancestors) if self.base_commit else ()

    def expected_names(self) -> tuple[str, ...] | None:
        """The shard names the run's manifests list (``--expect``, ``--shard I/N``), if any do."""
        named = [m.expected_names() for m in self.groups.values()]
        return tuple(n for names in named if names for n in names) if any(named) else None

    def describe(self) -> str:
        return (
            "; ".join(f"{m.describe()}" + (f" in job {g}" if g else "") for g, m in sorted(self.groups.items()))
            or "no manifest"
        )


@dataclass(frozen=True)
class NormalizedCopy:
    """A shard's bundle made ready to splice: the normalized object (the bundle itself when it
    was verified as normalized) and the version of its index (``keys.index_key``)."""

    key: str
    version: str | None
    index_version: str | None


@dataclass(frozen=True)
class ShardSent:
    """How a parts run's send of a shard as ``part`` (what it held) went: the upstream's answer
    (its run id, the bytes sent and their MD5), or the error it ended with."""

    part: str
    run_id: str | None = None
    size: int | None = None
    md5: str | None = None
    error: str | None = None
    run_hash: str | None = None  # a tokenless part's: the sha256 of the POST's bytes CodSpeed received

    def answer(self) -> Delivered:
        return Delivered(self.run_id, self.size or 0, self.md5)

    def to_item(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class ShardRecord:
    name: str
    state: str
    attempt: int = 0
    upload_id: str | None = None
    key: str | None = None
    size: int | None = None
    benchmarks: int | None = None
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
    md5: str | None = None  # the bundle's MD5 (base64), as its upload URL signed it: S3 took no other bytes
    normalized: NormalizedCopy | None = None  # a one-upload run's: its bundle made ready to splice
    group: str = ""  # the job group it belongs to (RunRecord)
    results_kept: bool = False  # its bundle's benchmarks are in the bucket (results/): counted by this release or later
    cost_ms: int | None = None  # what its benchmarks cost to run, in all (domain.costs), recorded at arrival
    longest_ms: int | None = None  # and its costliest benchmark's
    upstream: ShardSent | None = None  # a parts run's shard sent as it came

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "ShardRecord":
        """A record as ``asdict`` wrote it (in a plan, a snapshot, a kept source), by this release or the one before."""
        known = {k: v for k, v in item.items() if k in _SHARD_FIELDS}
        normalized, upstream = known.pop("normalized", None), known.pop("upstream", None)
        return cls(
            **known,
            normalized=NormalizedCopy(**normalized) if normalized else None,
            upstream=ShardSent(**upstream) if upstream else None,
        )

    @property
    def bundle_key(self) -> str:
        """Where its bundle is: a shard that arrived, or is carried, has one."""
        if self.key is None:
            raise ValueError(f"shard {self.name} ({self.state}) has no bundle")
        return self.key


_SHARD_FIELDS = frozenset(f.name for f in fields(ShardRecord))


def sent_as(shard: ShardRecord) -> str | None:
    """The part id a parts run's shard reached the upstream as (None: not sent, or its send failed)."""
    return None if shard.upstream is None or shard.upstream.error is not None else shard.upstream.part


@dataclass
class KeptSource:
    """A shard a run of its branch carried, copied beside that run (its bundle, normalized copy and
    results), so that it stays a source for the branch's later runs as long as that run's own
    bundles do, however long ago it was measured."""

    shard: ShardRecord  # the copy: its keys and versions are the keeping run's
    run_id: str  # the run it was measured in: the source a run carrying it names
    commit: str | None
    kept_at: float

    def source(self, project: str) -> RunRecord:
        return RunRecord(project=project, run_id=self.run_id, groups={}, commit=self.commit)


@dataclass
class GrantRecord:
    """A shard's upload grant (its ``UPLOAD#`` item): the upload URL handed out for one bundle,
    which the bundle that lands under its key is checked against."""

    shard: str
    upload_id: str
    size: int | None
    requested_at: str
    metadata: dict[str, Any] | None = None  # stored beside the record, read only when forwarding
    label: str | None = None
    executor: str = "valgrind"
    group: str = ""
    sent: "SentPost | None" = None  # a runner's POST as it sent it: forwarded byte for byte
    tokenless: bool = False  # sent without a token: its bundle is held to TokenlessMaxBundleBytes when it lands
    md5: str | None = None  # the bundle's MD5 (base64) its URL signs: a send needs no pass over it to say it
    origin: CiOrigin | None = None  # the CI run and attempt that asked for it: a close of theirs ends its wait


@dataclass(frozen=True)
class SentPost:
    """What a CodSpeed runner's ``POST /upload`` was: its body's bytes and its User-Agent. The API
    takes 256 KiB at most, so it is kept in the metadata's item (400 KB), not in an object."""

    body: bytes
    user_agent: str | None = None
    token: str | None = None  # the job's own OIDC token: relayed while valid, kept no longer than ``token_expires``
    token_expires: int = 0


@dataclass
class Snapshot:
    run: RunRecord
    shards: dict[str, ShardRecord]

    def consistent(self) -> bool:
        return self.run.rev == self.run.run_changes + sum(s.rev for s in self.shards.values())

    def arrived(self) -> dict[str, ShardRecord]:
        return {name: s for name, s in self.shards.items() if s.state == ARRIVED}

    def first_arrived(self) -> ShardRecord | None:
        """The shard counted first (its metadata is the run's, upstream); None when none was."""
        return min(self.arrived().values(), key=lambda s: (s.arrived_at or "", s.name), default=None)
