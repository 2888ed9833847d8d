"""The aggregator's own API: what ``codspeed-client`` sends and receives."""

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StringConstraints, model_validator

from codspeed_rules.names import CI_RUN_PATTERN, CI_URL_PATTERN, COMMIT_PATTERN, MAX_ANCESTORS
from codspeed_rules.runner_json import DuplicateKey, NotSerdeJson, read, same

from .model import WireModel
from .names import Project, RunId, ShardName, SkippedShard
from .upstream import UploadMetadata

MAX_SHARDS = 1000
Commit = Annotated[str, Field(pattern=COMMIT_PATTERN), AfterValidator(str.lower)]  # as the ledger keeps it
CiRun = Annotated[str, StringConstraints(pattern=CI_RUN_PATTERN)]  # a CI's own run id


MAX_METADATA_BODY = 128 * 1024  # a runner's POST body is a few KiB; matrix values make it longer, never this long


class ShardUploadRequest(WireModel):
    """Ask for a presigned URL to upload one shard's bundle. Its MD5 (CodSpeed's ``profileMd5``, and
    S3's Content-MD5) and, when given, its CRC32 are signed into the URL: S3 refuses other bytes.
    ``metadata_body`` is the metadata as it goes upstream, byte for byte: ``metadata`` is the same
    object, parsed, and must say the same thing type for type (read as serde_json reads it)."""

    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    shard: ShardName
    total: int | None = Field(default=None, ge=1, le=MAX_SHARDS, description="expected shard count")
    expect: list[ShardName] | None = Field(default=None, min_length=1, max_length=MAX_SHARDS)
    size: int = Field(gt=0, description="bundle size in bytes")
    crc32: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9+/]{6}==$",
        description="base64 of the bundle's big-endian CRC32, as S3's x-amz-checksum-crc32",
    )
    md5: str = Field(pattern=r"^[A-Za-z0-9+/]{22}==$", description="base64 of the bundle's raw MD5")
    metadata: UploadMetadata
    metadata_body: str = Field(min_length=2, max_length=MAX_METADATA_BODY)
    # a pull request's head, where the commit benchmarked is GitHub's merge commit of it: what people are shown
    head_commit: Commit | None = None
    # the CI run's page (GitLab's CI_PIPELINE_URL, Buildkite's BUILDKITE_BUILD_URL), linked from the report
    ci_url: str | None = Field(default=None, pattern=CI_URL_PATTERN)
    # the base branch's commit the change was built on (a pull request's base): its run is the baseline
    base_commit: Commit | None = None
    # its first-parent ancestors, the nearest first, where the clone holds them: without a run at the
    # base commit, the nearest of these with one is the baseline
    base_ancestors: list[Commit] = Field(default_factory=list, max_length=MAX_ANCESTORS)
    # the CI's attempt of the run (GitHub's GITHUB_RUN_ATTEMPT): every shard of one re-run joins one attempt
    ci_attempt: int | None = Field(default=None, ge=1, le=10_000)
    # the CI's own run (GitHub's run id, GitLab's pipeline, ...), whatever --run-id says: its close ends the wait
    ci_run: CiRun | None = None

    @model_validator(mode="before")
    @classmethod
    def _body_says_the_metadata(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("metadata_body"), str):
            return data
        try:
            sent = read(data["metadata_body"])
        except DuplicateKey as exc:
            raise ValueError(f"metadata_body names {exc.key!r} twice: a body is read one way only") from None
        except NotSerdeJson as exc:
            raise ValueError(f"metadata_body at {exc}") from None
        except ValueError as exc:
            raise ValueError(f"metadata_body is not JSON ({exc})") from None
        if not same(sent, data.get("metadata")):  # type for type: 10 is not 10.0, 1 not true
            raise ValueError(
                "metadata_body does not say what metadata says, type for type: send the same object in both"
            )
        return data

    @model_validator(mode="after")
    def _manifest_is_one_kind(self) -> "ShardUploadRequest":
        if self.total is not None and self.expect is not None:
            raise ValueError("give either total (a shard count) or expect (shard names), not both")
        if self.expect is not None and len(set(self.expect)) != len(self.expect):
            raise ValueError("expect lists a shard name twice")
        if self.metadata.profile_md5 != self.md5:
            raise ValueError("metadata.profileMd5 differs from md5")
        return self


class UploadGrant(WireModel):
    """Where and how to PUT the bundle: every header listed is signed and must be sent."""

    upload_url: str
    headers: dict[str, str]
    key: str
    upload_id: str
    expires_in: int
    run_id: str | None = None  # the run the bundle counts in: the asked one, or its next attempt ("<run>~2")
    attempt: int = 1
    sent_on_arrival: bool = False  # the parts mode: the shard goes upstream once counted (push waits for it)


class GiveBackRequest(WireModel):
    """A grant its client will not use (``push`` refused its own bundle, or was interrupted before its
    PUT was answered): named by its key, which only the grant's answer gave."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=1024)
    reason: str = Field(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")


class GiveBackAnswer(WireModel):
    project: str
    run_id: str
    upload_id: str
    state: Literal["given_back", "counted_already"]
    reason: str  # what the run's report says of the shard


JobName = Annotated[str, StringConstraints(min_length=1, max_length=255)]  # a CodSpeed runner's runPart.jobName
MAX_JOBS = 100


class OpenRequest(WireModel):
    """Declare a run before any shard runs (``codspeed-client open``): its manifest (shards
    pushed by the client, and the jobs of a CodSpeed workflow whose runners upload to us), the
    shards skipped on purpose (carried from the baseline, never missing), and what its shards'
    pushes will state (commit, ref): a later push must agree with all of it."""

    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    total: int | None = Field(default=None, ge=1, le=MAX_SHARDS, description="expected shard count")
    expect: list[ShardName] | None = Field(default=None, min_length=1, max_length=MAX_SHARDS)
    skip: list[ShardName] = Field(default=[], max_length=MAX_SHARDS)
    commit: Commit
    head_commit: Commit | None = None  # a pull request's head, where ``commit`` is GitHub's merge commit of it
    ref: str | None = Field(default=None, max_length=1000)
    base_ref: str | None = Field(default=None, max_length=1000)
    ci_url: str | None = Field(default=None, pattern=CI_URL_PATTERN)
    base_commit: Commit | None = None
    base_ancestors: list[Commit] = Field(default_factory=list, max_length=MAX_ANCESTORS)
    provider: Literal["GITHUB", "GITLAB"] = "GITHUB"  # the metadata's repositoryProvider: where to notify
    # the jobs of a CodSpeed workflow (the runner's jobName) and how many of each run (a matrix's
    # size, 1 for a plain job): their runners' uploads (POST /upload) count in this run
    jobs: dict[JobName, int] | None = Field(default=None, min_length=1, max_length=MAX_JOBS)
    # what the run's shards would send upstream, but the archive's (the CI job that opened it):
    # a run whose every shard is skipped is forwarded with it, carried shards alone
    metadata: UploadMetadata | None = None

    @model_validator(mode="after")
    def _manifest_holds_the_skips(self) -> "OpenRequest":
        self._one_manifest()
        self._metadata_is_the_runs()
        if self.skip and self.total is None and self.expect is None:
            raise ValueError(
                "skip names shards of total or expect; this open declares jobs only (a job that does "
                "not run is left out of jobs)"
            )
        names = self.manifest_names()
        if len(set(names)) != len(names):
            raise ValueError("expect lists a shard name twice")
        if outside := [name for name in self.skip if name not in names]:
            raise ValueError(
                f"skip names {', '.join(outside)}, not among the run's shards ({', '.join(names[:20])}"
                f"{', …' if len(names) > 20 else ''})"
            )
        return self

    def _one_manifest(self) -> None:
        """A count or names (not both), or a workflow's jobs, each run 1 to MAX_SHARDS times."""
        if self.total is not None and self.expect is not None:
            raise ValueError("give either total (a shard count) or expect (shard names), not both")
        if self.total is None and self.expect is None and not self.jobs:
            raise ValueError("give total (a shard count), expect (shard names) or jobs (a CodSpeed workflow's)")
        if bad := [f"{job}={n}" for job, n in (self.jobs or {}).items() if not 1 <= n <= MAX_SHARDS]:
            raise ValueError(f"jobs {', '.join(bad)}: a job runs 1 to {MAX_SHARDS} times")

    def _metadata_is_the_runs(self) -> None:
        """The metadata stated names this run's project and commit."""
        if self.metadata is not None and self.metadata.project not in (None, self.project):
            raise ValueError(f"metadata names project {self.metadata.project}, not {self.project}")
        if self.metadata is not None and self.metadata.commit_hash.lower() != self.commit:
            raise ValueError(f"metadata names commit {self.metadata.commit_hash}, not {self.commit}")

    def manifest_names(self) -> list[str]:
        """The run's shards: those ``expect`` names, or 1 to ``total``."""
        return self.expect or [str(i) for i in range(1, (self.total or 0) + 1)]


class BenchmarkCost(WireModel):
    seconds: float | None  # None: its figures recorded no time (a walltime result from before total times were kept)
    shard: str


class CostsAnswer(WireModel):
    """What each benchmark of a branch's latest forwarded run cost (``GET /v1/costs``): what
    ``codspeed-client durations`` and ``split`` balance shards with."""

    project: str
    branch: str
    run_id: str  # the latest run these costs come from
    commit: str | None = None
    runs: list[str] = []  # every run they come from, the latest first (a benchmark's latest recorded cost)
    for_run: str | None = None  # the run whose split they are pinned to (every split of it answers the same)
    benchmarks: dict[str, BenchmarkCost] = {}


class CloseRequest(WireModel):
    """A close: "the jobs of this CI run and attempt have ended" when ``ci_run`` is said (the gate's
    CI run, detected by the client), so a grant of theirs with nothing in the bucket is missing at once."""

    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    skip: list[SkippedShard] = Field(default=[], max_length=MAX_SHARDS)  # a runner job by its key (the report's name)
    ci_run: CiRun | None = None
    ci_attempt: int | None = Field(default=None, ge=1, le=10_000)
    # the closing job's runner (GitHub's RUNNER_NAME), as GitHub lists the attempt's jobs: a close without a
    # token speaks for its CI attempt only when every other job of it has ended
    ci_job: str | None = Field(default=None, min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")


class CloseAnswer(WireModel):
    project: str
    run_id: str
    state: str
    message: str
