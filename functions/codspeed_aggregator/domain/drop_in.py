"""Which run and which shard an unmodified CodSpeed runner's upload (``POST /upload``) is.

- GitHub Actions: ``runPart.runId`` is the workflow run and each ``runPartId`` (the job, its
  matrix, then the runner's JSON suffix with the executor and run index) is one shard. A
  re-run of a job sends the same runPartId, so it replaces the job's earlier upload. A job
  that runs two executors sends two runPartIds: two shards, both forwarded. The jobs of one
  ``jobName`` are a group: a matrix expects ``job-total`` jobs for every variant (executor,
  run index) seen, a plain job is a group of one. A workflow's groups can differ in shape.
- GitLab CI: ``runPart.runId`` is the job's own id, so the jobs of one pipeline share only
  the project, commit and ref: they are grouped by those. ``parallel: N`` jobs are named
  ``NAME i/N``: a group NAME of N; any other job is a group of one.
- CircleCI (the runner after 5.0.2): ``runPart.runId`` is the workflow, so a "rerun workflow"
  (a new workflow id) is a new run; the nodes of a job's ``parallelism`` are a group of
  ``node-total``, each ``runPartId`` ``{job}-{node}`` then the suffix. A node that never uploads
  leaves its run short of one, as a matrix job does on GitHub.
- Buildkite: the runner's upload names neither build nor job (no runPart, no CI data), and it
  POSTs to its upload URL verbatim, so the URL says them: ``/upload/buildkite/{build}/{step}/{job}/
  {index}/{count}`` (``BuildkiteJob``) makes the build's run (its id, as the client names it), the
  step a group of ``count`` jobs, each parallel job a shard, the job's own id told apart from a
  URL interpolated once for every job (``asked_upload.ci_job_refusal``). Such a run is forwarded merged (one-upload):
  CodSpeed's runner says Buildkite takes no multipart uploads.
- No runPart otherwise (Buildkite at ``/upload``, older runners): a run of one shard, keyed by its
  commit and archive, forwarded as it arrived.

A runPartId is opaque and can be hundreds of characters long: it is kept as the shard's
label, and a short, safe key derived from it (``job_key``) names the shard in storage. That key
holds ``names.JOB_MARK``, which no pushed shard's name may hold: a push can never be spelled like
a runner job's shard.
"""

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from codspeed_rules.names import JOB_MARK, gitlab_runner_run_id, is_run_id, shard_key
from codspeed_wire.api import MAX_SHARDS
from codspeed_wire.upstream import BUILDKITE, RunPart, UploadMetadata

from .errors import Unprocessable
from .manifest import Manifest
from .upstream_parts import AGGREGATED_KEY

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=+]+")  # runs of anything else, "-" too, become one "-"
_PARALLEL = re.compile(r"^(?P<job>.+?) (?P<index>[0-9]+)/(?P<total>[0-9]+)(?:-\{.*)?$", re.DOTALL)
_UNSAFE_GROUP = re.compile(r"[^A-Za-z0-9_.=+ -]")
MAX_KEY = 100


@dataclass(frozen=True)
class DropInShard:
    run_id: str
    shard: str  # the storage key (``job_key``)
    label: str  # what the runner called it (its runPartId); its name in the manifest
    manifest: Manifest  # of its group
    variant: str  # executor and run index: the manifest counts jobs per variant
    group: str = ""  # the job group (jobName): its manifest is its own


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def safe_key(text: str, limit: int = MAX_KEY, mark: str = "@") -> str:
    """A readable key for any string, unique to it: its safe characters, ``mark``, then a digest."""
    slug = _UNSAFE.sub("-", text).strip("-._=+")[: limit - 11] or "part"
    return f"{slug}{mark}{_digest(text, 10)}"


def job_key(label: str) -> str:
    """A runner job's storage key: its label's ``safe_key`` marked with ``JOB_MARK``, in no pushed name."""
    return safe_key(label, MAX_KEY, JOB_MARK)


def _job(run_id: str, label: str, manifest: Manifest, variant: str, group: str) -> DropInShard:
    return DropInShard(run_id, job_key(label), label, manifest, variant, group)


def _run_id(value: str) -> str:
    return value if is_run_id(value) else safe_key(value, 64)


def _single_part_run_id(metadata: UploadMetadata) -> str:
    """The run of an upload that names no run part: its commit and its CI run and job."""
    ci_run = _ci_job(metadata.model_extra or {}) or base64.b64decode(metadata.profile_md5 or "").hex()[:12] or "local"
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in ci_run)[:64]
    return f"{metadata.commit_hash[:12].lower()}-{safe}"


def _ci_job(extra: dict[str, Any]) -> str | None:
    """The CI run and job the metadata's CI data names (GitLab's over GitHub's), if any: two jobs, two runs."""
    named = [data for key in ("glData", "ghData") if isinstance(data := extra.get(key), dict) and data.get("runId")]
    return "-".join(str(named[0][k]) for k in ("runId", "job") if named[0].get(k)) if named else None


def ci_run_of(metadata: UploadMetadata, buildkite: "BuildkiteJob | None" = None) -> str | None:
    """The CI run a runner's upload came from, as a close names it: GitHub's workflow run and CircleCI's
    workflow (their ``runPart.runId``), a Buildkite build its upload URL names. GitLab's runner names its
    job, not its pipeline, and Buildkite's names nothing: a close cannot tell their jobs as its own."""
    if buildkite is not None:
        return buildkite.build
    part = metadata.run_part
    if part is None or metadata.run_environment not in ("GITHUB_ACTIONS", "CIRCLECI"):
        return None
    return part.run_id


_STEP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_SEGMENT_NUMBER = re.compile(r"[0-9]{1,4}")  # a parallel job's index or count: MAX_SHARDS (1000) at most


@dataclass(frozen=True)
class BuildkiteJob:
    """A Buildkite job as its upload URL names it (``/upload/buildkite/$BUILDKITE_BUILD_ID/
    ${BUILDKITE_STEP_KEY:-$BUILDKITE_STEP_ID}/$BUILDKITE_JOB_ID/${BUILDKITE_PARALLEL_JOB:-0}/
    ${BUILDKITE_PARALLEL_JOB_COUNT:-1}``): its build, its step (by its key, as Buildkite shows it,
    else its id), the job's own id, and its place among the step's parallel jobs (from 0)."""

    build: str
    step: str
    index: int
    count: int
    job: str | None = None  # None: the URL of release 1.0.0, which names no job (a URL made once goes unseen)

    @classmethod
    def from_path(cls, build: str, step: str, index: str, count: str, job: str | None = None) -> "BuildkiteJob":
        """Refused, naming the segment, where the URL cannot name a job of a build."""
        if not is_run_id(build):
            raise Unprocessable(f"the upload URL's build {build!r} is not a Buildkite build id ($BUILDKITE_BUILD_ID)")
        if not _STEP.match(step):
            raise Unprocessable(
                f"the upload URL's step {step!r} is not a Buildkite step key or id "
                "(${BUILDKITE_STEP_KEY:-$BUILDKITE_STEP_ID})"
            )
        if job is not None and not _STEP.match(job):
            raise Unprocessable(f"the upload URL's job {job!r} is not a Buildkite job id ($BUILDKITE_JOB_ID)")
        numbers = _SEGMENT_NUMBER.fullmatch(index) and _SEGMENT_NUMBER.fullmatch(count)
        if not (numbers and 0 <= int(index) < int(count) <= MAX_SHARDS):
            raise Unprocessable(
                f"the upload URL's parallel job {index!r} of {count!r} is not one of 1 to {MAX_SHARDS} "
                "(${BUILDKITE_PARALLEL_JOB:-0}/${BUILDKITE_PARALLEL_JOB_COUNT:-1})"
            )
        return cls(build, step, int(index), int(count), job)

    def same_job_again(self) -> str:
        """Why a second archive from this job is refused: only a URL made once for every job names one
        job twice with two archives (a job retried is a new job, with an id of its own)."""
        return (
            f"Buildkite job {self.job} sent another archive before: the upload URL names the same job in every "
            "job, as a URL set in a step's env: block does (Buildkite interpolates it once, when the pipeline "
            "is uploaded). Set CODSPEED_UPLOAD_URL in the step's command, $$ before each variable "
            "(docs/setup/buildkite.md)"
        )

    def shard(self, metadata: UploadMetadata) -> DropInShard:
        """Its shard of the build's run: the step a group of ``count``, the job one of them."""
        if metadata.run_environment != BUILDKITE:
            raise Unprocessable(
                f"the upload URL names Buildkite build {self.build}, but the runner says it runs on "
                f"{metadata.run_environment}: point only Buildkite jobs at /upload/buildkite/…"
            )
        label = f"{self.step} {self.index + 1}/{self.count}" if self.count > 1 else self.step
        return _job(self.build, label, Manifest(total=self.count), metadata.executor, group_of(self.step))


def shard_of(metadata: UploadMetadata, buildkite: BuildkiteJob | None = None) -> DropInShard:
    if buildkite is not None:
        return buildkite.shard(metadata)
    part = metadata.run_part
    if part is None:
        # a run of one, whose job may upload once per executor: one job of each
        name = shard_key("1", metadata.executor)
        return DropInShard(_single_part_run_id(metadata), job_key(name), "1", Manifest(total=1), metadata.executor)
    label = part.run_part_id
    if AGGREGATED_KEY in label:  # upstream, it would stand in the place of one of our merged parts
        raise Unprocessable(
            f"runPart.runPartId {label!r} holds {AGGREGATED_KEY}…, which names the aggregator's own "
            "run parts: CodSpeed's runner never writes it"
        )
    return _gitlab_job(metadata, part) if metadata.run_environment == "GITLAB_CI" else _workflow_job(metadata, part)


def _workflow_job(metadata: UploadMetadata, part: RunPart) -> DropInShard:
    """A GitHub Actions or CircleCI job: its workflow run's (its runId), a matrix a group of its
    ``job-total`` (CircleCI: its nodes), any other job a group of one."""
    label = part.run_part_id
    total = part.total_parts()
    if total is not None and not 1 <= total <= MAX_SHARDS:
        raise Unprocessable(
            f"runPart.metadata job-total is {total}: a matrix (CircleCI: its parallelism) has 1 to {MAX_SHARDS} jobs"
        )
    job = part.job_name or label.split("-{", 1)[0]
    if metadata.run_environment == "CIRCLECI" and not part.job_name:
        job = re.sub(r"-[0-9]+$", "", job)  # {job}-{node}: the nodes are one job
    variant = part.variant(metadata.executor)
    return _job(_run_id(part.run_id), label, Manifest(total=total or 1), variant, group_of(job))


def _gitlab_job(metadata: UploadMetadata, part: RunPart) -> DropInShard:
    """A GitLab job: its pipeline's run (the project, commit and ref: its runId is the job's), a
    ``parallel: N`` job (``NAME i/N``) one of a group NAME of N, any other a group of one."""
    run_id, label = gitlab_runner_run_id(metadata.commit_hash, metadata.ref), part.run_part_id
    name, variant = part.job_name or label, part.variant(metadata.executor)
    parallel = _PARALLEL.match(name) or _PARALLEL.match(label)
    if parallel and 1 <= int(parallel["index"]) <= int(parallel["total"]) <= MAX_SHARDS:
        return _job(run_id, label, Manifest(total=int(parallel["total"])), variant, group_of(parallel["job"]))
    return _job(run_id, label, Manifest(total=1), variant, group_of(name))


_STRATEGY = ("job-index", "job-total")
_SUFFIX = ("executor", "run-index", "run-part-index")


def display_label(label: str | None) -> str | None:
    """A runPartId as a reader says it: ``bench-{"shard":1}-{"job-index":0,"job-total":3}-{"executor":
    "valgrind","run-index":0}`` is ``bench [shard 1, job 1/3]`` (another executor or run index is
    named too); a label that is not a runner's is left as it is."""
    if not label or "-{" not in label:
        return None
    job, rest = label.split("-{", 1)
    found = _suffixes("{" + rest)
    if found is None:
        return None
    words = _words(found)
    return f"{job} [{', '.join(words)}]" if words else job


def _words(found: dict[str, Any]) -> list[str]:
    """A runPartId's suffixes as a reader says them: its matrix keys, its job of the matrix's, an
    executor other than valgrind, a run index past the first."""
    words = [f"{k} {v}" for k, v in found.items() if k not in _STRATEGY + _SUFFIX]
    if isinstance(found.get("job-index"), int) and found.get("job-total"):
        words.append(f"job {found['job-index'] + 1}/{found['job-total']}")
    if found.get("executor") not in (None, "valgrind"):
        words.append(str(found["executor"]))
    return words + [f"{k} {found[k]}" for k in ("run-index", "run-part-index") if found.get(k)]


def _suffixes(rest: str) -> dict[str, Any] | None:
    """The JSON objects a runner's runPartId ends with (``-{…}-{…}``), merged; None where they are not."""
    found: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    while rest:
        try:
            value, end = decoder.raw_decode(rest)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        found.update(value)
        rest = rest[end:].removeprefix("-")
    return found


def group_of(job_name: str) -> str:
    """A job group's key: the job's name when it is short and plain, else a safe key of it."""
    return (
        job_name if job_name and len(job_name) <= 64 and not _UNSAFE_GROUP.search(job_name) else safe_key(job_name, 64)
    )
