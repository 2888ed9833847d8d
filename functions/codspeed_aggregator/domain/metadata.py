"""The CodSpeed metadata of a run: who it is for, and what the merged upload says."""

import copy

from codspeed_wire.upstream import UploadMetadata

from .errors import Conflict


def check_identity(run_identity: dict | None, mine: dict | None) -> None:
    """Refuse a shard whose commit, project or ref differs from the run's first shard."""
    if not run_identity or mine is None:
        return
    for field, value in run_identity.items():
        if mine.get(field) != value:
            raise Conflict(
                f"metadata field {field} is {mine.get(field)!r} in this shard but {value!r} in the run: "
                "every shard of a run must agree on it"
            )


def ci_url(metadata: UploadMetadata) -> str | None:
    """The CI run's page, where the metadata says enough to know it (GitHub Actions)."""
    extra = metadata.model_extra or {}
    gh = extra.get("ghData") if isinstance(extra.get("ghData"), dict) else {}
    run = gh.get("runId") or (metadata.run_part.run_id if metadata.run_part else None)
    if metadata.run_environment != "GITHUB_ACTIONS" or not metadata.project or not str(run or "").isdigit():
        return None
    return f"https://github.com/{metadata.project}/actions/runs/{run}"


def as_sent_metadata(sent: dict, md5: str, gzipped: bool) -> dict:
    """A shard's own metadata for forwarding its archive as it was sent: the archive's MD5 and
    encoding (what a CodSpeed runner sent already; what a pushed bundle's metadata lacks)."""
    metadata = copy.deepcopy(sent)
    metadata["profileMd5"] = md5
    metadata["profileEncoding"] = "gzip" if gzipped else None
    return metadata


def merged_metadata(run_id: str, base: dict, shards: list[str], md5: str, part: int = 1, parts: int = 1,
                    carried: dict | None = None) -> dict:
    """A merged upload's metadata: ``base`` (the run's first arrived shard's metadata, unknown
    fields kept) with the recomputed profileMd5, gzip encoding and a runPart that describes the merged run:
    its shards, the part it is when the benchmarks had to be split, and the shards carried
    from a baseline run."""
    merged = as_sent_metadata(base, md5, gzipped=True)
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
