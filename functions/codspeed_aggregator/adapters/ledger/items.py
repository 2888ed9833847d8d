"""The ledger's records as their items hold them: a shard, an upload request and a run's entry in
its project's list (the run itself: ``run_item``)."""

import json
from typing import Any

from ...domain.closing import CiOrigin
from ...domain.records import GrantRecord, NormalizedCopy, RunRecord, ShardRecord, ShardSent
from .codec import PROJECT_PREFIX, SHARD_PREFIX


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


def listed_item(run: RunRecord, expires_at: int) -> dict[str, Any]:
    """The run's entry in its project's list of runs, newest last."""
    return {
        "pk": f"{PROJECT_PREFIX}{run.project}",
        "sk": f"{run.created_at}#{run.run_id}",
        "run_id": run.run_id,
        "expires_at": expires_at,
    }
