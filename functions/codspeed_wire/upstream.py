"""CodSpeed's upload protocol, as its runner speaks it (metadata version 10).

The aggregator both answers it (``POST /upload``, drop-in ingestion) and speaks it
(forwarding the merged upload). Unknown fields are kept so that a round trip through
the aggregator loses nothing a newer runner adds.
"""

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from codspeed_rules.runner_json import in_runner_order

from .model import WireModel
from .names import Owner, Segment

# The oldest metadata version still sent by runners in the wild (7 until early 2026).
OLDEST_VERSION = 5
MAX_RUN_PART_ID = 4096  # opaque, matrix values are free text: hundreds of characters are normal
# runEnvironment of a Buildkite job: the runner's provider there sends no run part ("For Buildkite, we don't
# support multipart uploads"), so an upload there never carries one
BUILDKITE = "BUILDKITE"


class _Camel(WireModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def wire(self) -> dict[str, Any]:
        """The JSON object as sent on the wire: camelCase, unknown fields kept, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Runner(_Camel):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    instruments: list[str] = []
    executor: str | None = None


class RunPart(_Camel):
    run_id: str = Field(min_length=1, max_length=128)
    run_part_id: str = Field(min_length=1, max_length=MAX_RUN_PART_ID)
    job_name: str = ""
    metadata: dict[str, Any] = {}

    def total_parts(self) -> int | None:
        """The matrix size when the runner reports one (GitHub's ``job-total``, CircleCI's parallel
        ``node-total``), else None."""
        for key in ("job-total", "jobTotal", "job_total", "node-total"):
            value = self.metadata.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
        return None

    def variant(self, executor: str | None) -> str:
        """What tells apart the uploads of one job: its executor, and the runner's counters of
        invocations (``run-index``) and of uploads within one (``run-part-index``)."""
        parts = [str(self.metadata.get("executor") or executor or "")]
        parts += [str(self.metadata[k]) for k in ("run-index", "run-part-index") if k in self.metadata]
        return "/".join(parts)


class UploadMetadata(_Camel):
    version: int = Field(ge=OLDEST_VERSION)
    commit_hash: str = Field(pattern=r"^[0-9a-fA-F]{7,64}$")
    profile_md5: str | None = Field(default=None, pattern=r"^[A-Za-z0-9+/]{22}==$")  # CodSpeed's runner always sends it
    runner: Runner
    repository_provider: str = "GITHUB"
    tokenless: bool = False
    profile_encoding: str | None = None
    run_environment: str | None = None
    run_part: RunPart | None = None
    allow_empty: bool | None = None
    ref: str | None = None
    head_ref: str | None = None
    base_ref: str | None = None
    owner: Owner | None = None  # GitLab: group/subgroup
    repository: Segment | None = None
    event: str | None = None

    def wire(self) -> dict[str, Any]:
        return in_runner_order(super().wire())

    @property
    def project(self) -> str | None:
        return f"{self.owner}/{self.repository}" if self.owner and self.repository else None

    @property
    def executor(self) -> str:
        return self.runner.executor or "valgrind"  # runners before executors existed ran valgrind

    def identity(self) -> dict[str, str | None]:
        """The fields every shard of one run must agree on (a run may hold several executors:
        a job uploads once per executor, and each executor is forwarded on its own)."""
        return {
            "commitHash": self.commit_hash.lower(),
            "owner": self.owner,
            "repository": self.repository,
            "ref": self.ref,
        }


class UploadAccepted(WireModel):
    status: Literal["success"] = "success"
    uploadUrl: str
    runId: str
