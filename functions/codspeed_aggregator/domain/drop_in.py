"""Which run and which shard an unmodified CodSpeed runner's upload (``POST /upload``) is.

- GitHub Actions: ``runPart.runId`` is the workflow run and each ``runPartId`` (the job, its
  matrix, then the runner's JSON suffix with the executor and run index) is one shard. A
  re-run of a job sends the same runPartId, so it replaces the job's earlier upload. A job
  that runs two executors sends two runPartIds: two shards, both forwarded. The manifest is
  ``job-total`` jobs for every variant (executor, run index) seen.
- GitLab CI: ``runPart.runId`` is the job's own id, so the jobs of one pipeline share only
  the project, commit and ref: they are grouped by those. ``parallel: N`` jobs are named
  ``NAME i/N``, which gives the manifest.
- No runPart (Buildkite, older runners): a run of one shard, keyed by its commit and CI run,
  forwarded as it arrived.

A runPartId is opaque and can be hundreds of characters long: it is kept as the shard's
label, and a short, safe key derived from it names the shard in storage.
"""

import base64
import hashlib
import re
from dataclasses import dataclass

from codspeed_wire.api import MAX_SHARDS
from codspeed_rules.names import is_run_id
from codspeed_wire.upstream import UploadMetadata

from .errors import Unprocessable
from .manifest import Manifest

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=+]+")  # runs of anything else, "-" too, become one "-"
_PARALLEL = re.compile(r"^(?P<job>.+?) (?P<index>[0-9]+)/(?P<total>[0-9]+)(?:-\{.*)?$", re.DOTALL)
MAX_KEY = 100


@dataclass(frozen=True)
class DropInShard:
    run_id: str
    shard: str  # the storage key
    label: str  # what the runner called it (its runPartId)
    manifest: Manifest
    variant: str  # executor and run index: the manifest counts jobs per variant


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def safe_key(text: str, limit: int = MAX_KEY) -> str:
    """A readable key for any string, unique to it: its safe characters, then a digest."""
    slug = _UNSAFE.sub("-", text).strip("-._=+")[: limit - 11] or "part"
    return f"{slug}@{_digest(text, 10)}"


def _run_id(value: str) -> str:
    return value if is_run_id(value) else safe_key(value, 64)


def _single_part_run_id(metadata: UploadMetadata) -> str:
    """The run of an upload that names no run part: its commit and its CI run and job."""
    extra = metadata.model_extra or {}
    ci_run = None
    for key in ("ghData", "glData"):
        data = extra.get(key)
        if isinstance(data, dict) and data.get("runId"):
            ci_run = "-".join(str(data[k]) for k in ("runId", "job") if data.get(k))  # two jobs, two runs
    if ci_run is None:
        ci_run = base64.b64decode(metadata.profile_md5 or "").hex()[:12] or "local"
    safe = "".join(c if c.isalnum() or c in "_.-" else "-" for c in ci_run)[:64]
    return f"{metadata.commit_hash[:12].lower()}-{safe}"


def shard_of(metadata: UploadMetadata) -> DropInShard:
    part = metadata.run_part
    if part is None:
        return DropInShard(_single_part_run_id(metadata), "1", "1", Manifest(total=1, indexed=True), metadata.executor)
    variant = part.variant(metadata.executor)
    label = part.run_part_id
    if metadata.run_environment == "GITLAB_CI":
        run_id = f"gl-{metadata.commit_hash[:12].lower()}-{_digest(metadata.ref or '', 8)}"
        parallel = _PARALLEL.match(part.job_name or label) or _PARALLEL.match(label)
        total = int(parallel["total"]) if parallel else None
        manifest = Manifest(total=total) if total and 1 <= int(parallel["index"]) <= total else Manifest()
        return DropInShard(run_id, safe_key(label), label, manifest, variant)
    total = part.total_parts()
    if total is not None and not 1 <= total <= MAX_SHARDS:
        raise Unprocessable(f"runPart.metadata job-total is {total}: a matrix has 1 to {MAX_SHARDS} jobs")
    return DropInShard(_run_id(part.run_id), safe_key(label), label, Manifest(total=total) if total else Manifest(), variant)
