"""The ledger's records as its items hold them: a run (its item and its tallies), a shard, an
upload request; and the attributes a run item keeps per job group."""

import json
from typing import Any

from codspeed_wire.report import UpstreamEntry

from ...domain.closing import Awaiting, CiOrigin
from ...domain.identity import RunIdentity
from ...domain.ledger import OPEN, GrantRecord, NormalizedCopy, RunRecord, ShardRecord, ShardSent
from ...domain.manifest import Manifest
from ...domain.outcome import Outcome
from ...domain.plan_record import PlanRecord
from .codec import CARRIED_PREFIX, COUNT_PREFIX, GROUP_PREFIX, PROJECT_PREFIX, RUN_SK, SHARD_PREFIX, run_pk

CARRIED_COUNT = "carried_shards"  # on a run item's outcome


def group_attribute(group: str) -> str:
    return f"{GROUP_PREFIX}{group}"


def count_attribute(group: str) -> str:
    return f"{COUNT_PREFIX}{group}"


def _counts(item: dict[str, Any]) -> dict[str, int]:
    return {k.removeprefix(COUNT_PREFIX): int(v) for k, v in item.items() if k.startswith(COUNT_PREFIX)}


def _groups(
    item: dict[str, Any], tallies: list[dict[str, Any]]
) -> tuple[dict[str, Manifest], dict[str, int], tuple[str, ...]]:
    """A run's groups, their counts (its item's: those a next attempt inherited; plus its tallies')
    and variants."""
    groups = {
        k.removeprefix(GROUP_PREFIX): Manifest.from_item(v) for k, v in item.items() if k.startswith(GROUP_PREFIX)
    }
    counts = _counts(item)
    for tally in tallies:
        for group, n in _counts(tally).items():
            counts[group] = counts.get(group, 0) + n
    variants = tuple(sorted(item.get("variants") or ()))
    return groups, counts, variants


def run_from(item: dict[str, Any], tallies: list[dict[str, Any]]) -> RunRecord:
    """A run's record from its item and its tallies (those written so far). Its revision counts
    the run's own changes (its item's) and its shards' (its tallies')."""
    groups, counts, variants = _groups(item, tallies)
    return RunRecord(
        project=item["project"],
        run_id=item["run_id"],
        groups=groups,
        group_counts=counts,
        state=item["state"],
        commit=item.get("commit"),
        head_commit=item.get("head_commit"),
        ref=item.get("ref"),
        base_ref=item.get("base_ref"),
        base_commit=item.get("base_commit"),
        base_ancestors=tuple(item.get("base_ancestors") or ()),
        identity=RunIdentity.from_json(item.get("identity")),
        created_at=item.get("created_at", ""),
        deadline_at=item.get("deadline_at", 0),
        rev=item.get("rev", 0) + sum(t.get("rev", 0) for t in tallies),
        run_changes=item.get("run_changes", 0),
        skipped=tuple(dict.fromkeys(item.get("skipped") or ())),
        upstream=UpstreamEntry.model_validate(item["upstream"]) if item.get("upstream") else None,
        forward_error=item.get("forward_error"),
        lease_until=item.get("lease_until", 0),
        arrived_count=sum(counts.values()),
        outcome=_outcome(item),
        attempt=item.get("run_attempt", 1),
        variants=variants,
        closing=bool(item.get("close_requested")),
        closed_by=CiOrigin.from_item(item.get("closed_by")),
        awaiting=Awaiting.from_item(item.get("awaiting")),
        given_up=dict(item.get("given_up") or {}),
        grants=int(item.get("grants", 0)),
        ci_url=item.get("ci_url"),
        tokenless=bool(item.get("tokenless")),
        fork=bool(item.get("fork")),
        provider=item.get("provider"),
        declared=bool(item.get("declared")),
        ci_attempt=item.get("ci_attempt"),
        rerun=bool(item.get("rerun")),
        sends_parts=bool(item.get("sends_parts")),
        by_executor=bool(item.get("by_executor")),
        plan=plan_from(item),
        owed=bool(item.get("owed")),
    )


def plan_from(item: dict[str, Any]) -> PlanRecord | None:
    """What a run's item records of its plan, kept as JSON text."""
    return PlanRecord.from_item(json.loads(item["plan"])) if item.get("plan") else None


def shard_from(item: dict[str, Any]) -> ShardRecord:
    return ShardRecord(
        name=item["sk"].removeprefix(SHARD_PREFIX),
        state=item["state"],
        attempt=item.get("attempt", 0),
        upload_id=item.get("upload_id"),
        key=item.get("key"),
        size=item.get("size"),
        benchmarks=item.get("benchmarks"),
        pids=item.get("pids") or [],
        arrived_at=item.get("arrived_at"),
        reason=item.get("reason"),
        rev=item.get("rev", 0),
        noted_upload=item.get("noted_upload"),
        requested_at=item.get("requested_at"),
        label=item.get("label"),
        executor=item.get("executor") or "valgrind",
        gzipped=item.get("gzipped", True),
        inherited_from=item.get("inherited_from"),
        version_id=item.get("version_id"),
        md5=item.get("md5"),
        normalized=NormalizedCopy(**item["normalized"]) if item.get("normalized") else None,
        group=item.get("group") or "",
        results_kept=bool(item.get("results_kept")),
        cost_ms=item.get("cost_ms"),
        longest_ms=item.get("longest_ms"),
        upstream=ShardSent(**json.loads(item["upstream"])) if item.get("upstream") else None,
    )


def upload_from(item: dict[str, Any]) -> GrantRecord:
    return GrantRecord(
        shard=item["shard"],
        upload_id=item["upload_id"],
        size=item.get("size"),
        requested_at=item["requested_at"],
        label=item.get("label"),
        executor=item.get("executor") or "valgrind",
        group=item.get("group") or "",
        tokenless=bool(item.get("tokenless")),
        md5=item.get("md5"),
        origin=CiOrigin.from_item(item.get("origin")),
    )


def run_item(run: RunRecord, expires_at: int) -> dict[str, Any]:
    """A new run's item: its fields, a top-level attribute per job group, and the flags it has set."""
    item: dict[str, Any] = {
        "pk": run_pk(run.project, run.run_id),
        "sk": RUN_SK,
        "project": run.project,
        "run_id": run.run_id,
        "state": run.state,
        "commit": run.commit,
        "ref": run.ref,
        "base_ref": run.base_ref,
        "base_commit": run.base_commit,
        "identity": run.identity.to_json() if run.identity else "null",
        "created_at": run.created_at,
        "deadline_at": run.deadline_at,
        "open_pk": OPEN,
        "rev": run.rev,
        "run_changes": run.run_changes,
        "run_attempt": run.attempt,
        "ci_url": run.ci_url,
        "expires_at": expires_at,
        "group_count": len(run.groups),  # what ``Runs.add_group`` and ``add_variant`` bound
        "variant_count": len(run.variants),
    }
    item |= {group_attribute(g): m.to_item() for g, m in run.groups.items()}
    item.update({count_attribute(g): n for g, n in run.group_counts.items()})
    flags = {  # set only where the run has them: an item carries no empty attribute
        "skipped": list(run.skipped),
        "head_commit": run.head_commit,
        "variants": set(run.variants),
        "tokenless": run.tokenless,
        "fork": run.fork,
        "base_ancestors": list(run.base_ancestors),
        "provider": run.provider,
        "declared": run.declared,
        "ci_attempt": run.ci_attempt,
        "rerun": run.rerun,
        "sends_parts": run.sends_parts,
        "by_executor": run.by_executor,
    }
    return item | {name: value for name, value in flags.items() if value}


def listed_item(run: RunRecord, expires_at: int) -> dict[str, Any]:
    """The run's entry in its project's list of runs, newest last."""
    return {
        "pk": f"{PROJECT_PREFIX}{run.project}",
        "sk": f"{run.created_at}#{run.run_id}",
        "run_id": run.run_id,
        "expires_at": expires_at,
    }


def carried_items(
    project: str, run_id: str, outcome: Outcome, expires_at: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A finished run's outcome as its item keeps it (how many shards it carried), and an item
    beside it for each: they are as many as its shards, and its item stays small."""
    kept = outcome.to_item()
    carried = kept.pop("carried")
    items = [
        {"pk": run_pk(project, run_id), "sk": f"{CARRIED_PREFIX}{name}", "carried": json.dumps(entry)}
        | {"expires_at": expires_at}
        for name, entry in carried.items()
    ]
    return kept | ({CARRIED_COUNT: len(carried)} if carried else {}), items


def carried_count(item: dict[str, Any]) -> int:
    """How many shards a run item's outcome carried: each is an item beside it."""
    return int((item.get("outcome") or {}).get(CARRIED_COUNT, 0))


def _outcome(item: dict[str, Any]) -> Outcome:
    """A run item's outcome, its carried shards aside (``carried_items``)."""
    kept = {k: v for k, v in (item.get("outcome") or {}).items() if k != CARRIED_COUNT}
    return Outcome.from_item(kept)
