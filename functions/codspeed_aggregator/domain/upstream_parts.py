"""What a run forwards: which shards go in which upload to the upstream.

valgrind profiles merge (pids renumbered, ``domain.merge``), in uploads of at most CodSpeed's
benchmark limit each, and of at most ``max_bytes`` of bundles (an upload URL is an S3 PUT:
5 GB at most; and one finalizer invocation merges one upload). Other executors' profiles
(walltime, memory) hold files that do not merge (``perf.pipedata``, ``perf.metadata``,
msgpack artifacts), so each such shard goes as its own upload, as its uploader sent it: one
run part of the same upstream run. A job group's lone valgrind shard is forwarded as it was
sent too.

A Buildkite build goes as CodSpeed's runner uploads there, with no run part (``plan_build``): every
step's shards of one executor in one upload, walltime's merged too (its results and maps renumbered
by pid; a second shard's perf data kept beside the first's under its shard's name, which CodSpeed does
not read: its flame graphs are the first shard's), memory's each alone (a memory folder's
``ExecutionTimestamps`` maps timestamps to benchmarks and names no process: two shards' timelines in one
upload could not be told apart).
"""

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from codspeed_rules.bundle import VALGRIND
from codspeed_rules.runner_json import AGGREGATOR_JOB, runner_part_id

from .records import ShardRecord


@dataclass(frozen=True)
class UpstreamPart:
    """One run part forwarded upstream. A merged part goes under ``run_part_id``, stable for
    what it holds (its group, and its place among the group's merged parts), so a part sent
    again replaces itself upstream; a shard sent as it was keeps its uploader's runPartId."""

    shards: tuple[str, ...]
    merged: bool  # False: one shard's archive and metadata, forwarded as its uploader sent them
    group: str = ""
    run_part_id: str | None = None  # merged parts only

    @property
    def key(self) -> str:
        """What the upstream knows this part as: its runPartId, or the shard forwarded as sent."""
        if self.merged:
            assert self.run_part_id is not None, "a merged part is planned with its runPartId"
            return self.run_part_id
        return f"shard:{self.shards[0]}"

    def to_item(self) -> dict[str, Any]:
        return {"shards": list(self.shards), "merged": self.merged, "group": self.group, "id": self.run_part_id}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "UpstreamPart":
        return cls(tuple(item["shards"]), bool(item["merged"]), item.get("group") or "", item.get("id"))


AGGREGATED_KEY = '"aggregated-'  # our runPartIds' own JSON keys start with it: a runner's id holding it is refused


def merged_part_id(group: str, number: int) -> str:
    """The runPartId of a group's ``number``-th merged part (valgrind's: no other executor merges).
    Ours are namespaced: the runner ends each of its own ids with ``-{"executor":…,"run-index":N}``,
    and a runner's id holding AGGREGATED_KEY is refused at its POST, so no runner's equals one.
    Each kind has its own first key, so no group's name makes one kind's id another's: a job group
    (named like our own job, even) ``aggregated-part``, the pushed shards ``aggregated-pushed-part``,
    a pushed shard sent as it was ``aggregated-shard``."""
    if group:
        return runner_part_id(group, {"aggregated-part": number, "executor": VALGRIND})
    return runner_part_id(AGGREGATOR_JOB, {"aggregated-pushed-part": number, "executor": VALGRIND})


def empty_part_id() -> str:
    """The runPartId of the part with no benchmark that a run measuring nothing on its commit sends in
    the parts mode (every shard skipped: CodSpeed fills them all from the baseline), so that CodSpeed
    has a run for the commit, as the runner sends one with ``allowEmpty``."""
    return runner_part_id(AGGREGATOR_JOB, {"aggregated-empty-part": 1, "executor": VALGRIND})


def part_id(upload: UpstreamPart, shards: dict[str, ShardRecord]) -> str:
    """A stable id of what an upload holds (its shards, at the objects validated), not of where it
    stands in a plan: an attempt sends again only the parts whose id changed (a shard re-run)."""
    held = "\n".join(f"{name}={shards[name].key}@{shards[name].version_id}" for name in upload.shards)
    return hashlib.sha256(held.encode()).hexdigest()[:24]


def claim_id(run_part_id: str, executor: str) -> str:
    """What a part is claimed under: the runPartId it goes upstream as, not what it holds, so two
    versions of one part (a shard re-pushed while its first send is on its way) are sent one after
    the other, never both at once (the upstream keeps the last PUT of a runPartId). With its
    executor: a runner's upload with no runPart goes once per executor under none."""
    return hashlib.sha256(f"{executor}\n{run_part_id}".encode()).hexdigest()[:32]


MAX_UPLOAD_BYTES = 4 << 30  # under S3's 5 GB PUT, with room for the merge's own bytes


def plan_uploads(shards: list[tuple[str, int, int]], limit: int, max_bytes: int = MAX_UPLOAD_BYTES) -> list[list[str]]:
    """Group shards (name, benchmark count, bundle bytes), in order, into uploads of at most
    ``limit`` benchmarks and ``max_bytes`` each; a shard over either by itself goes alone."""
    groups: list[list[str]] = []
    count = size = 0
    for name, benchmarks, nbytes in shards:
        if not groups or count + benchmarks > limit or size + nbytes > max_bytes:
            groups.append([])
            count = size = 0
        groups[-1].append(name)
        count += benchmarks
        size += nbytes
    return groups


MERGED_IN_A_BUILD = (VALGRIND, "walltime")


def build_part_id(executor: str, number: int) -> str:
    """The id a Buildkite build's ``number``-th upload of ``executor`` is claimed and planned under:
    it goes upstream with no run part, as the runner's upload there."""
    return runner_part_id(AGGREGATOR_JOB, {"aggregated-build-part": number, "executor": executor})


def plan_build(shards: dict[str, ShardRecord], limit: int, max_bytes: int = MAX_UPLOAD_BYTES) -> list[UpstreamPart]:
    """A Buildkite build's uploads, whole in every attempt (the runner there sends each executor's
    upload whole, and CodSpeed is taken to show the latest of each for a commit): each executor's
    shards, every step's, merged in uploads of at most ``limit`` benchmarks and ``max_bytes`` (valgrind
    first), memory's each alone."""
    by_executor: dict[str, list[tuple[str, ShardRecord]]] = {}
    for name, shard in shards.items():
        by_executor.setdefault(shard.executor, []).append((name, shard))
    uploads: list[UpstreamPart] = []
    for executor in sorted(by_executor, key=lambda e: (e != VALGRIND, e)):
        members = by_executor[executor]
        if executor not in MERGED_IN_A_BUILD:
            uploads += [UpstreamPart((name,), merged=False, group=shard.group) for name, shard in members]
            continue
        sized = [(name, shard.benchmarks or 0, shard.size or 0) for name, shard in members]
        for number, chosen in enumerate(plan_uploads(sized, limit, max_bytes), 1):
            uploads.append(UpstreamPart(tuple(chosen), True, executor, build_part_id(executor, number)))
    return uploads


def plan_forward(
    shards: dict[str, ShardRecord],
    limit: int,
    max_bytes: int = MAX_UPLOAD_BYTES,
    kept: Sequence[UpstreamPart] = (),
    merge: bool = True,
) -> list[UpstreamPart]:
    """The uploads of a run, in a stable order (a retry makes the same plan).

    ``kept`` are the parts of the run's earlier attempt: each keeps its shards (those still in
    the run) under its id, so that the upstream, which holds them, gets each benchmark once
    whatever the attempt; only shards in none of them are planned here, group by group: valgrind
    shards merged (in parts of at most ``limit`` benchmarks and ``max_bytes``), others each as
    sent, and a group's lone valgrind shard, or one over ``limit`` by itself, as sent too (as
    its uploader would have). Without ``merge`` (a parts run, whose shards went upstream as they
    came) every shard goes as it was sent."""
    uploads, rest = _kept(shards, kept)
    if not merge:
        return uploads + [UpstreamPart((n,), merged=False, group=s.group) for n, s in rest.items()]
    for group, members in _by_group(rest).items():
        uploads += _group_uploads(group, members, uploads, limit, max_bytes)
    return uploads


def _kept(
    shards: dict[str, ShardRecord], kept: Sequence[UpstreamPart]
) -> tuple[list[UpstreamPart], dict[str, ShardRecord]]:
    """The earlier attempt's parts, each with its shards still in the run (and in no part before
    it), and the shards none of them holds, by name in order."""
    uploads: list[UpstreamPart] = []
    placed: set[str] = set()
    for part in kept:
        held = tuple(n for n in part.shards if n in shards and n not in placed)
        if held:
            uploads.append(UpstreamPart(held, part.merged, part.group, part.run_part_id))
            placed.update(held)
    return uploads, {n: shards[n] for n in sorted(shards) if n not in placed}


def _by_group(shards: dict[str, ShardRecord]) -> dict[str, dict[str, ShardRecord]]:
    """Shards by job group, the groups in order, each group's shards in their order."""
    groups: dict[str, dict[str, ShardRecord]] = {}
    for name, shard in shards.items():
        groups.setdefault(shard.group, {})[name] = shard
    return dict(sorted(groups.items()))


def _group_uploads(
    group: str, shards: dict[str, ShardRecord], planned: list[UpstreamPart], limit: int, max_bytes: int
) -> list[UpstreamPart]:
    """One group's uploads: its valgrind shards merged (``_merged``), one over ``limit`` by itself as
    sent (as the runner would have: a merged part never holds more than the limit), and its other
    executors' as sent."""
    valgrind = {n: s for n, s in shards.items() if s.executor == VALGRIND}
    mergeable = {n: s for n, s in valgrind.items() if (s.benchmarks or 0) <= limit}
    alone = [UpstreamPart((n,), merged=False, group=group) for n in valgrind if n not in mergeable]
    merged = _merged(group, mergeable, planned + alone, limit, max_bytes)
    others = [UpstreamPart((n,), merged=False, group=group) for n in shards if n not in valgrind]
    return alone + merged + others


def _merged(
    group: str, shards: dict[str, ShardRecord], planned: list[UpstreamPart], limit: int, max_bytes: int
) -> list[UpstreamPart]:
    """A group's valgrind shards merged, in parts under ids ``planned`` does not hold; a lone one as
    sent, when the group has no merged part yet."""
    taken = {u.run_part_id for u in planned if u.merged and u.group == group}
    if len(shards) == 1 and not taken:
        return [UpstreamPart(tuple(shards), merged=False, group=group)]
    free = _free_ids(group, taken)
    sized = [(n, s.benchmarks or 0, s.size or 0) for n, s in shards.items()]
    return [UpstreamPart(tuple(chosen), True, group, next(free)) for chosen in plan_uploads(sized, limit, max_bytes)]


def _free_ids(group: str, taken: set[str | None]) -> Iterator[str]:
    """The group's merged part ids in order, those ``taken`` (an earlier attempt's) skipped."""
    return (part for part in (merged_part_id(group, n) for n in itertools.count(1)) if part not in taken)
