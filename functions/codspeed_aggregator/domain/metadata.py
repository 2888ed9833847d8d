"""The CodSpeed metadata of a run: who it is for, and what the merged upload says."""

import base64
import copy

from codspeed_wire.upstream import UploadMetadata

from .errors import Conflict


def check_identity(run_identity: dict | None, metadata: UploadMetadata) -> None:
    """Refuse a shard whose commit, project, ref or executor differs from the run's first shard."""
    if not run_identity:
        return
    mine = metadata.identity()
    for field, value in run_identity.items():
        if mine.get(field) != value:
            raise Conflict(
                f"metadata field {field} is {mine.get(field)!r} in this shard but {value!r} in the run: "
                "every shard of a run must agree on it"
            )


def single_part_run_id(metadata: UploadMetadata) -> str:
    """The run of an upload that names no run part: its commit and its CI run and job."""
    extra = metadata.model_extra or {}
    ci_run = None
    for key in ("ghData", "glData"):
        data = extra.get(key)
        if isinstance(data, dict) and data.get("runId"):
            ci_run = "-".join(str(data[k]) for k in ("runId", "job") if data.get(k))  # two jobs, two runs
    if ci_run is None:
        ci_run = base64.b64decode(metadata.profile_md5).hex()[:12]
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in ci_run)[:64]
    return f"{metadata.commit_hash[:12].lower()}-{safe}"


def merged_metadata(run_id: str, base: dict, shards: list[str], md5: str, part: int = 1, parts: int = 1,
                    carried: dict | None = None) -> dict:
    """A merged upload's metadata: ``base`` (the run's first arrived shard's metadata, unknown
    fields kept) with the recomputed profileMd5 and a runPart that describes the merged run:
    its shards, the part it is when the benchmarks had to be split, and the shards carried
    from a baseline run."""
    merged = copy.deepcopy(base)
    merged["profileMd5"] = md5
    run_part = merged.get("runPart") or {}
    details = {"aggregatedShards": shards, "part": part, "parts": parts}
    if carried:
        details["carriedShards"] = {name: {"runId": c["run_id"], "commitHash": c["commit"]} for name, c in carried.items()}
    merged["runPart"] = {
        "runId": run_part.get("runId", run_id),
        "runPartId": f"aggregated-{len(shards)}-shards" if parts == 1 else f"aggregated-part-{part}-of-{parts}",
        "jobName": run_part.get("jobName", "codspeed-shard-aggregator"),
        "metadata": details,
    }
    return merged
