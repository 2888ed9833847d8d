"""The aggregator's own API: what ``codspeed-client`` sends and receives."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from codspeed_rules.names import CI_URL_PATTERN, COMMIT_PATTERN, MAX_ANCESTORS

from .names import Project, RunId, ShardName
from .upstream import UploadMetadata

MAX_SHARDS = 1000


class ShardUploadRequest(BaseModel):
    """Ask for a presigned URL to upload one shard's bundle. Its checksum is signed into the URL
    and S3 refuses other bytes. codspeed-client sends a CRC32 (a fifth of an MD5's time);
    an MD5 is CodSpeed's own."""

    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    shard: ShardName
    total: int | None = Field(default=None, ge=1, le=MAX_SHARDS, description="expected shard count")
    expect: list[ShardName] | None = Field(default=None, min_length=1, max_length=MAX_SHARDS)
    size: int = Field(gt=0, description="bundle size in bytes")
    crc32: str | None = Field(default=None, pattern=r"^[A-Za-z0-9+/]{6}==$",
                              description="base64 of the bundle's big-endian CRC32, as S3's x-amz-checksum-crc32")
    md5: str | None = Field(default=None, pattern=r"^[A-Za-z0-9+/]{22}==$", description="base64 of the bundle's raw MD5")
    metadata: UploadMetadata
    # the CI run's page (GitLab's CI_PIPELINE_URL, Buildkite's BUILDKITE_BUILD_URL), linked from the report
    ci_url: str | None = Field(default=None, pattern=CI_URL_PATTERN)
    # the base branch's commit the change was built on (a pull request's base): its run is the baseline
    base_commit: str | None = Field(default=None, pattern=COMMIT_PATTERN)
    # its first-parent ancestors, the nearest first, where the clone holds them: without a run at the
    # base commit, the nearest of these with one is the baseline
    base_ancestors: list[Annotated[str, Field(pattern=COMMIT_PATTERN)]] = Field(default_factory=list,
                                                                               max_length=MAX_ANCESTORS)

    @model_validator(mode="after")
    def _manifest_is_one_kind(self) -> "ShardUploadRequest":
        if self.total is not None and self.expect is not None:
            raise ValueError("give either total (a shard count) or expect (shard names), not both")
        if self.expect is not None and len(set(self.expect)) != len(self.expect):
            raise ValueError("expect lists a shard name twice")
        if self.crc32 is None and self.md5 is None:
            raise ValueError("give the bundle's crc32 or md5: S3 checks the upload against it")
        if self.metadata.profile_md5 != self.md5:
            raise ValueError("metadata.profileMd5 differs from md5")
        return self


class UploadGrant(BaseModel):
    """Where and how to PUT the bundle: every header listed is signed and must be sent."""

    upload_url: str
    headers: dict[str, str]
    key: str
    upload_id: str
    expires_in: int
    run_id: str | None = None  # the run the bundle counts in: the asked one, or its next attempt ("<run>~2")
    attempt: int = 1


class CloseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    skip: list[ShardName] = Field(default=[], max_length=MAX_SHARDS)


class CloseAnswer(BaseModel):
    project: str
    run_id: str
    state: str
    message: str
