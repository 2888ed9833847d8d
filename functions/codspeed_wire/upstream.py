"""CodSpeed's upload protocol, as its runner speaks it (metadata version 10).

The aggregator both answers it (``POST /upload``, drop-in ingestion) and speaks it
(forwarding the merged upload). Unknown fields are kept so that a round trip through
the aggregator loses nothing a newer runner adds.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Camel(BaseModel):
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
    run_part_id: str = Field(min_length=1, max_length=128)
    job_name: str = ""
    metadata: dict[str, Any] = {}

    def total_parts(self) -> int | None:
        """The matrix size when the runner reports one (``job-total``), else None."""
        for key in ("job-total", "jobTotal", "job_total"):
            value = self.metadata.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str) and value.isdigit():
                return int(value)
        return None


class UploadMetadata(_Camel):
    version: int = Field(ge=1)
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
    owner: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    repository: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    event: str | None = None

    @property
    def project(self) -> str | None:
        return f"{self.owner}/{self.repository}" if self.owner and self.repository else None

    def identity(self) -> dict[str, str | None]:
        """The fields every shard of one run must agree on."""
        return {
            "commitHash": self.commit_hash.lower(),
            "owner": self.owner,
            "repository": self.repository,
            "ref": self.ref,
            "executor": self.runner.executor,
        }


class UploadAccepted(BaseModel):
    status: Literal["success"] = "success"
    uploadUrl: str
    runId: str
