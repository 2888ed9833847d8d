"""CodSpeed's upload metadata for a shard, built from the CI and git when the folder carries none."""

from __future__ import annotations

from . import __version__
from .ci import CiContext
from .system import machine

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

    from .bundle import Bundle  # loaded by push only

METADATA_VERSION = 10
WITHOUT_CI_DATA = 11  # the runner after 5.0.2: no ghData nor glData (what its CircleCI uploads are)


def repository_provider(ctx: CiContext) -> str:
    """Where the repository lives, as CodSpeed's metadata names it."""
    return "GITLAB" if ctx.provider == "GITLAB_CI" else "GITHUB"


def build(
    ctx: CiContext,
    *,
    project: str,
    run_id: str,
    commit: str,
    shard: str,
    bundle: Bundle | None = None,
    tokenless: bool = False,
) -> dict[str, Any]:
    """What a shard is uploaded under: the metadata its folder carries (``bundle``'s, a runner's
    own), else made from the CI as CodSpeed's runner makes it, for ``bundle``'s executor."""
    owner, repository = project.rsplit("/", 1)  # GitLab: group/subgroup/repo
    carried = bundle.carried_metadata if bundle else None
    executor = bundle.executor if bundle else "valgrind"
    if carried is not None:
        metadata = dict(carried)
        metadata.pop("profileMd5", None)  # the runner's own archive's; S3 checks this bundle's CRC32 instead
    else:
        metadata = {
            "repositoryProvider": repository_provider(ctx),
            "version": WITHOUT_CI_DATA if ctx.provider == "CIRCLECI" else METADATA_VERSION,
            "tokenless": tokenless,
            "profileEncoding": "gzip",
            "runner": {
                "name": "codspeed-client",
                "version": __version__,
                "instruments": [],
                "executor": executor,
                **machine(),
            },
            "runEnvironment": ctx.provider,
            "allowEmpty": False,
            "event": ctx.event or "push",
            "sender": ctx.sender,
            # the runner's: the checkout with a trailing slash, GitLab's CI_PROJECT_DIR as it is
            "repositoryRootPath": ctx.repository_root or ""
            if ctx.provider == "GITLAB_CI"
            else (ctx.repository_root or "").rstrip("/") + "/",
            **({} if ctx.provider == "CIRCLECI" else {"ghData": None, "glData": None}),
            "localData": None,  # the runner sends each, null when absent
            **ctx.extra,
        }
    metadata.update(
        {
            "tokenless": tokenless,  # a fork's pull request: sent upstream without a token, as the runner sends it
            "commitHash": commit,
            "owner": owner,
            "repository": repository,
            "ref": metadata.get("ref") or ctx.ref,
            "headRef": metadata.get("headRef") or ctx.head_ref,
            "baseRef": metadata.get("baseRef") or ctx.base_ref,
            "runPart": {"runId": run_id, "runPartId": shard, "jobName": ctx.job or "codspeed", "metadata": {}},
        }
    )
    return metadata
