"""The CodSpeed metadata of a run: who it is for, and what the merged upload says."""

import copy
from dataclasses import dataclass
from typing import Any

from codspeed_rules.bundle import VALGRIND
from codspeed_rules.names import split_shard_key
from codspeed_rules.runner_json import AGGREGATOR_JOB, in_runner_order, pushed_part_id
from codspeed_wire.upstream import BUILDKITE, UploadMetadata

from .attempts import base_run_id
from .outcome import CarriedShard
from .records import ShardRecord
from .upstream_parts import UpstreamPart, claim_id


def ci_url(metadata: UploadMetadata) -> str | None:
    """The CI run's page, where the metadata says enough to know it (GitHub Actions)."""
    extra = metadata.model_extra or {}
    gh: dict[str, Any] = extra["ghData"] if isinstance(extra.get("ghData"), dict) else {}
    run = gh.get("runId") or (metadata.run_part.run_id if metadata.run_part else None)
    if metadata.run_environment != "GITHUB_ACTIONS" or not metadata.project or not str(run or "").isdigit():
        return None
    return f"https://github.com/{metadata.project}/actions/runs/{run}"


COMBINED_MARK = "@"  # in no run id a client or a runner may send (``names.RUN_ID_PATTERN``): ours alone


def combined_run_id(sent: dict[str, Any], run_id: str) -> str | None:
    """The upstream run a runner job's part goes under where CodSpeed cannot combine a CI run's jobs
    itself: on GitLab each job sends its own id (``CI_JOB_ID``) as ``runPart.runId``, so the aggregator
    names the pipeline's run (invariant 14's one exception). It holds ``COMBINED_MARK``, so no pushed
    ``--run-id`` can be spelled like it. None: the part keeps its own (a GitHub workflow run, a CircleCI
    workflow, a part the client pushed under the aggregator's run)."""
    part = sent.get("runPart") or {}
    if sent.get("runEnvironment") != "GITLAB_CI" or part.get("runId") in (None, base_run_id(run_id)):
        return None
    return f"gitlab{COMBINED_MARK}{base_run_id(run_id)}"


def with_run_id(sent: dict[str, Any], upstream_run: str | None) -> dict[str, Any]:
    """``sent`` with its ``runPart.runId`` rewritten to ``upstream_run`` (nothing else changed), or as it is."""
    if upstream_run is None:
        return sent
    return {**sent, "runPart": {**sent["runPart"], "runId": upstream_run}}


def _on_buildkite(sent: dict[str, Any]) -> bool:
    """An upload of a Buildkite job: the runner's provider there sends no run part."""
    return sent.get("runEnvironment") == BUILDKITE


def without_run_part(sent: dict[str, Any]) -> dict[str, Any] | None:
    """A Buildkite upload's metadata as the runner sends it there, without the run part a push
    named (None: it has none, or runs elsewhere)."""
    if not _on_buildkite(sent) or sent.get("runPart") is None:
        return None
    return {**sent, "runPart": None}


def as_sent_metadata(sent: dict[str, Any], md5: str, gzipped: bool) -> dict[str, Any]:
    """A shard's own metadata for forwarding its archive as it was sent: the archive's MD5 and
    encoding (what a CodSpeed runner sent already; what a pushed bundle's metadata lacks)."""
    metadata = copy.deepcopy(sent)
    metadata["profileMd5"] = md5
    metadata["profileEncoding"] = "gzip" if gzipped else None
    return in_runner_order(metadata)


def names_archive(sent: dict[str, Any], md5: str, gzipped: bool) -> bool:
    """Whether an upload's own metadata describes this archive as it is (its MD5 and encoding): its
    POST can then go upstream as it came."""
    return sent.get("profileMd5") == md5 and sent.get("profileEncoding") == ("gzip" if gzipped else None)


def upstream_part_id(shard: ShardRecord) -> str:
    """The runPartId a shard was sent under: its runner's, else a pushed shard's (its name and executor)."""
    if shard.label:
        return shard.label
    name, _ = split_shard_key(shard.name)
    return pushed_part_id(name, shard.executor) if shard.group == "" else shard.name


def part_claim(upload: UpstreamPart, shards: dict[str, ShardRecord]) -> str:
    """The claim an upload is sent under (``uploads.claim_id``): its merged runPartId, or its shard's."""
    if upload.merged:
        return claim_id(upload.key, VALGRIND)
    shard = shards[upload.shards[0]]
    return claim_id(upstream_part_id(shard), shard.executor)


def as_carried(base: dict[str, Any] | None, shard: ShardRecord) -> dict[str, Any]:
    """The metadata a shard carried from another run goes alone under: the run's (``base``), with
    the shard's own runPartId, the one it was sent under, and executor."""
    metadata = copy.deepcopy(_stated(base))
    metadata["runPart"] = {**(metadata.get("runPart") or {}), "runPartId": upstream_part_id(shard)}
    metadata["runner"] = {**(metadata.get("runner") or {}), "executor": shard.executor}
    return metadata


SYSTEM_FIELDS = (
    "os",
    "osVersion",
    "arch",
    "host",
    "user",
    "cpuBrand",
    "cpuName",
    "cpuVendorId",
    "cpuCores",
    "totalMemoryGb",
)  # the runner's machine (cpuFlags left out: a hundred flags per shard)


@dataclass(frozen=True)
class MergedPart:
    """What one merged upload holds: its runPartId, its job group and its place among the
    group's merged parts, each shard with the CodSpeed metadata it was uploaded with (None for
    a shard carried from another run), and the shards carried."""

    run_id: str  # the run's, without its attempt: the upstream run when no shard names one
    run_part_id: str
    group: str
    number: int
    group_parts: int
    shards: list[tuple[ShardRecord, dict[str, Any] | None]]
    carried: dict[str, CarriedShard]


def _stated(base: dict[str, Any] | None) -> dict[str, Any]:
    """The run's metadata, which a part of shards none of which kept its own goes under: a run
    with none is closed empty before any part is planned."""
    if base is None:
        raise ValueError("no metadata for the part: none of its shards kept the metadata it was sent with")
    return base


def shard_identity(shard: ShardRecord, sent: dict[str, Any] | None) -> dict[str, Any]:
    """Who a merged shard was: its runner's runPartId and job, executor, run index and matrix keys
    (the runPart's metadata), its machine and its CI job."""
    sent = sent or {}
    part, runner = sent.get("runPart") or {}, sent.get("runner") or {}
    return {
        "shard": shard.name,
        "runPartId": part.get("runPartId") or shard.label or shard.name,
        "jobName": part.get("jobName"),
        "executor": runner.get("executor") or shard.executor,
        "metadata": part.get("metadata") or {},
        **_machine_and_job(sent, runner),
    }


def _machine_and_job(sent: dict[str, Any], runner: dict[str, Any]) -> dict[str, Any]:
    """The runner's machine, and its CI job where the metadata says it."""
    ci = {k: sent[k] for k in ("ghData", "glData") if sent.get(k)}
    return {"system": {k: runner[k] for k in SYSTEM_FIELDS if k in runner}} | ({"ci": ci} if ci else {})


def merged_metadata(base: dict[str, Any] | None, part: MergedPart, md5: str) -> dict[str, Any]:
    """A merged upload's metadata: the metadata of its first arrived shard (the top-level
    ``runner`` is that shard's, and ``runnerOf`` says which; unknown fields kept), with the
    recomputed profileMd5, gzip encoding and a runPart that describes the part: the run's
    runId (``base``, the run's first arrived shard's: every part of the run goes to one upstream
    run), the part's stable runPartId, and every shard's identity."""
    uploaded = sorted(
        ((s, m) for s, m in part.shards if m is not None), key=lambda sm: (sm[0].arrived_at or "", sm[0].name)
    )
    first, sent = uploaded[0] if uploaded else (None, _stated(base))
    merged = as_sent_metadata(sent, md5, gzipped=True)
    if not part.shards:  # the part of a run that measured nothing (every shard skipped): no benchmark, on purpose
        merged["allowEmpty"] = True
    if _on_buildkite(sent):  # as the runner's own upload there: no run part
        merged["runPart"] = None
        return in_runner_order(merged)
    merged["runPart"] = {
        "runId": _upstream_run_id(base, sent, part.run_id),
        "runPartId": part.run_part_id,
        "jobName": (sent.get("runPart") or {}).get("jobName") or part.group or AGGREGATOR_JOB,
        "metadata": _part_details(part, first),
    }
    return in_runner_order(merged)


def _upstream_run_id(base: dict[str, Any] | None, sent: dict[str, Any], run_id: str) -> str:
    """The upstream run every part of the run goes to: a GitLab pipeline's one run, else the run's
    first shard's (``base``), else this part's first shard's (``sent``), else the run's own id."""
    said: str = (
        combined_run_id(base or sent, run_id)
        or ((base or {}).get("runPart") or {}).get("runId")
        or (sent.get("runPart") or {}).get("runId")
        or run_id
    )
    return said


def _part_details(part: MergedPart, first: ShardRecord | None) -> dict[str, Any]:
    """What a merged part says of itself: each shard's identity, whose runner it names, its place
    among its group's merged parts, and the shards it carried with the run each was measured in."""
    details: dict[str, Any] = {
        "aggregatedShards": [shard_identity(s, m) for s, m in part.shards],
        "runnerOf": first.name if first else None,
        "part": part.number,
        "parts": part.group_parts,
    }
    if part.carried:
        details["carriedShards"] = {
            name: {"runId": c.run_id, "commitHash": c.commit} for name, c in part.carried.items()
        }
    return details
