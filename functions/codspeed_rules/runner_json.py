"""CodSpeed's upload metadata as its runner writes it, and as both sides read it: the field order,
serde_json's compact bytes, one reading of a body (no key twice), and the runPartId of a shard
pushed by codspeed-client, which the client writes and the aggregator checks with this one function."""

from __future__ import annotations

import json

TYPE_CHECKING = False  # the client imports this: typing costs every command 3 ms at start-up
if TYPE_CHECKING:
    from typing import Any

RUNNER_ORDER = (  # the runner's own field order (src/upload/interfaces.rs)
    "repositoryProvider",
    "version",
    "tokenless",
    "profileMd5",
    "profileEncoding",
    "runner",
    "runEnvironment",
    "runPart",
    "commitHash",
    "allowEmpty",
    "ref",
    "headRef",
    "baseRef",
    "owner",
    "repository",
    "event",
    "sender",
    "ghData",
    "glData",
    "localData",
    "repositoryRootPath",
)

# the jobName of the aggregator's own parts, and the first word of a pushed shard's runPartId
AGGREGATOR_JOB = "codspeed-shard-aggregator"


def in_runner_order(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata with its fields in the runner's order; fields the runner does not send last, as they came."""
    return {
        **{k: metadata[k] for k in RUNNER_ORDER if k in metadata},
        **{k: v for k, v in metadata.items() if k not in RUNNER_ORDER},
    }


def compact(value: Any) -> bytes:
    """serde_json's compact form, as the runner writes its POST body: no spaces, non-ASCII as it is,
    the same escapes for quotes, backslashes and control characters, keys in the order given."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class DuplicateKey(ValueError):
    """A JSON object names one key twice: readers disagree on which value it means."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears twice in one object")
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found


def read(body: bytes | str) -> Any:
    """A JSON body read one way only: an object naming a key twice raises ``DuplicateKey`` (serde's
    derived readers refuse it; Python's ``json`` keeps the last value, others the first)."""
    return json.loads(body, object_pairs_hook=_unique)


def runner_part_id(job: str, suffix: dict[str, Any]) -> str:
    """A runPartId in the runner's form: the job, then a JSON object (``-{"executor":…}``)."""
    return f"{job}-{json.dumps(suffix, separators=(',', ':'))}"


def pushed_part_id(name: str, executor: str) -> str:
    """The runPartId of a shard pushed by codspeed-client: one per name and executor, so two executors'
    shard 1 are two parts (CodSpeed keeps the last upload of a runPartId). Its first key,
    ``aggregated-shard``, is refused in any runner's runPartId, so no runner job's part equals one."""
    return runner_part_id(AGGREGATOR_JOB, {"aggregated-shard": name, "executor": executor})
