"""CodSpeed's upload metadata for a shard, as CodSpeed's runner would write it for this job
(``ci``'s model of the job is the runner's), and the bytes the client sends it as."""

from __future__ import annotations

from codspeed_rules.runner_json import AGGREGATOR_JOB, compact, in_runner_order, pushed_part_id

from . import __version__
from .ci import CiContext
from .system import machine

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

    from .bundle import Bundle  # loaded by push only

METADATA_VERSION = 10
WITHOUT_CI_DATA = 11  # the runner after 5.0.2: no ghData nor glData (what its CircleCI uploads are)


# the runner's RunEvent (src/run_environment/interfaces.rs, 5.0.2): any other event, it stops
RUNNER_EVENTS = ("push", "pull_request", "workflow_dispatch", "schedule", "local")


def check_event(event: str | None) -> None:
    """Refuse, as CodSpeed's runner refuses in its own words, a CI event it never runs under (GitHub's
    ``merge_group``, ``pull_request_target``, ``release``; GitLab's ``parent_pipeline``,
    ``external_pull_request_event``): its parts would reach CodSpeed under an event CodSpeed never gets."""
    if event is not None and event not in RUNNER_EVENTS:
        from .errors import CONFIG, ClientError

        raise ClientError(
            f"Event {event} is not supported by CodSpeed (its runner runs on {', '.join(RUNNER_EVENTS[:4])}): "
            "run the benchmarks on one of those",
            CONFIG,
        )


def _run_part(ctx: CiContext, run_id: str, shard: str, executor: str, run_index: int) -> dict[str, Any]:
    """The upload's ``runPart``: its run, its own id, its job, and the job's matrix as the runner says it."""
    suffix: dict[str, Any] = {"executor": executor}
    if ctx.provider != "LOCAL":  # the runner counts a job's uploads; a local run is a new run each time
        suffix["run-index"] = run_index
    return {
        "runId": run_id,
        "runPartId": pushed_part_id(shard, executor),
        "jobName": "local-job" if ctx.provider == "LOCAL" else ctx.job or AGGREGATOR_JOB,
        "metadata": dict(sorted({**ctx.part_metadata, **suffix}.items())),  # the runner's: a sorted map
    }


def build(  # noqa: PLR0913 -- each part of what the job is, a keyword
    ctx: CiContext,
    *,
    project: str,
    run_id: str,
    commit: str,
    shard: str,
    bundle: Bundle | None = None,
    tokenless: bool = False,
    md5: str | None = None,
    expected_parts: int = 1,
    run_index: int = 0,
) -> dict[str, Any]:
    """What a shard is uploaded under: the metadata its folder carries (``bundle``'s, a runner's own),
    else made from the CI as CodSpeed's runner makes it, for ``bundle``'s executor; ``md5``: the
    archive's, as pushed. Where the client must differ from the runner (docs/protocol.md): its
    ``runner.name``, and its ``runPart``'s ``runId`` (the aggregator's run) and ``runPartId`` (the
    aggregator's own id for the shard, ``pushed_part_id``: a key space no runner job's id is in)."""
    check_event(ctx.event)
    owner, repository = project.rsplit("/", 1)  # GitLab: group/subgroup/repo
    carried = bundle.carried_metadata if bundle else None
    executor = bundle.executor if bundle else "valgrind"
    part = _run_part(ctx, run_id, shard, executor, run_index)
    stated = {
        "tokenless": tokenless,  # a fork's pull request: sent upstream without a token, as the runner sends it
        "profileMd5": md5,
        "profileEncoding": "gzip",  # a pushed bundle is gzipped, whatever the executor
        "runPart": part,
        "commitHash": commit,
        "owner": owner,
        "repository": repository,
    }
    if carried is not None:
        return in_runner_order({**carried, **stated})
    made: dict[str, Any] = {
        "repositoryProvider": ctx.repository_provider,
        "version": WITHOUT_CI_DATA if ctx.provider == "CIRCLECI" else METADATA_VERSION,
        "runner": {
            "name": "codspeed-client",
            "version": __version__,
            "instruments": [],
            "executor": executor,
            **machine(),
        },
        "runEnvironment": ctx.provider,
        "allowEmpty": False,
        "ref": ctx.ref,
        "headRef": ctx.head_ref,
        "baseRef": ctx.base_ref,
        "event": ctx.event or "push",
        "sender": ctx.sender,
        **({} if ctx.provider == "CIRCLECI" else {"ghData": None, "glData": None}),
        "localData": {"expectedRunPartsCount": expected_parts} if ctx.provider == "LOCAL" else None,
        "repositoryRootPath": ctx.repository_root or "",
        **ctx.extra,  # ghData / glData
    }
    return in_runner_order({**made, **stated})


def body(metadata: dict[str, Any]) -> bytes:
    """The metadata as the runner POSTs it (serde_json, compact): what goes upstream byte for byte."""
    return compact(metadata)


def run_hash(sent: bytes) -> str:
    """The runner's "CodSpeed Run Hash" of a tokenless upload: the sha256 of its POST's bytes."""
    import hashlib

    return hashlib.sha256(sent).hexdigest()
