"""Grant an upload: a shard pushed by ``codspeed-client`` (``POST /v1/uploads``) or a CodSpeed
runner pointed at us (``POST /upload``, answered as CodSpeed answers). Opens the run, or its
next attempt, on the first upload."""

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_rules.names import EXECUTOR_PATTERN, shard_key
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import ShardUploadRequest, UploadGrant
from codspeed_wire.upstream import BUILDKITE, UploadAccepted, UploadMetadata

from ..adapters.bucket import Bucket
from ..adapters.ledger import CiJobs, Closes, Runs, Shards
from ..domain.asked_upload import AskedUpload, admit, refuse_skipped
from ..domain.closing import CiOrigin
from ..domain.drop_in import BuildkiteJob, ci_run_of, shard_of
from ..domain.errors import Busy, Conflict, Unprocessable, existing
from ..domain.identity import RunIdentity
from ..domain.keys import bundle_key
from ..domain.ledger import GrantRecord, RunRecord, SentPost, base_run_id
from ..domain.manifest import Manifest
from ..domain.metadata import ci_url
from ..domain.timestamps import iso
from ..services.run_attempts import RunAttempts
from ..settings import Settings

GRANT_TRIES = 3  # a run claimed for finalizing while an upload was granted in it: the grant goes to its next attempt


@dataclass
class RequestUpload:
    settings: Settings
    runs: Runs  # DynamoDB: the run item, opened here
    closes: Closes  # DynamoDB: the grant counted on the run's item, under its close and its bound
    shards: Shards  # DynamoDB: upload requests, and shards an attempt inherits
    ci_jobs: CiJobs  # DynamoDB: the archive a Buildkite job's upload URL first took
    store: Bucket  # S3: presigned PUTs under bundles/
    attempts: RunAttempts  # the run, or its next attempt, an upload goes to
    clock: Callable[[], float] = time.time

    def grant(self, request: ShardUploadRequest, fork: CiOrigin | None = None) -> UploadGrant:
        """``fork``: sent without a token by a fork's pull request, the Actions run and attempt GitHub
        vouched for (``fork_pull_requests``): its CI run and attempt, whatever the request says."""
        origin = fork or CiOrigin(request.ci_run, request.ci_attempt)
        if request.size > self.settings.max_bundle_bytes:
            raise Unprocessable(f"size {request.size} is over the limit of {self.settings.max_bundle_bytes} bytes")
        if fork and request.size > self.settings.tokenless_max_bundle_bytes:
            raise Unprocessable(
                f"size {request.size} is over the limit of {self.settings.tokenless_max_bundle_bytes} "
                "bytes for a shard sent without a token (the aggregator's TokenlessMaxBundleBytes)"
            )
        if not request.metadata.project:  # forwarded, it would go under no project, and the stack's token
            raise Unprocessable(
                f"metadata has no owner and repository: say {request.project!r} in its owner and "
                "repository, as CodSpeed's runner does"
            )
        if request.metadata.project != request.project:
            raise Unprocessable(
                f"metadata names project {request.metadata.project!r} but the request is for {request.project!r}"
            )
        executor = request.metadata.executor
        if not re.fullmatch(EXECUTOR_PATTERN, executor):
            raise Unprocessable(
                f"metadata.runner.executor {executor!r} is not an executor's name (valgrind, walltime, "
                "memory: what a CodSpeed runner writes)"
            )
        if request.expect is not None:
            manifest = Manifest(names=tuple(request.expect))
        elif request.total is not None:
            manifest = Manifest(total=request.total, indexed=True)
        else:
            manifest = Manifest()
        _check_pushed_part(request)
        # Two executors' shard 1 are two shards: counted, reported and forwarded apart.
        return self._grant(
            AskedUpload(
                project=request.project,
                run_id=request.run_id,
                shard=request.shard,
                manifest=manifest,
                metadata=request.metadata,
                size=request.size,
                content_type="application/gzip",
                crc32=request.crc32,
                page=request.ci_url,
                base_commit=request.base_commit,
                base_ancestors=tuple(request.base_ancestors),
                variant=executor,
                key=shard_key(request.shard, executor),
                origin=origin,
                fork=fork is not None,
                sent=SentPost(request.metadata_body.encode()),
                head_commit=request.head_commit,
                merged=request.metadata.run_environment == BUILDKITE,
            )
        )

    def accept_drop_in(  # noqa: PLR0913 -- the POST, and what its route and token say beside it
        self,
        metadata: UploadMetadata,
        sent: SentPost | None = None,
        fork: CiOrigin | None = None,
        ci_attempt: int | None = None,
        buildkite: BuildkiteJob | None = None,
    ) -> UploadAccepted:
        """``POST /upload`` as CodSpeed answers it: a runner pointed at us becomes a shard
        (which run and which shard: ``domain.drop_in``). Its upload URL signs the runner's MD5,
        and only that: the runner sends the archive's own type and encoding. ``sent``: the POST as
        it came (``metadata`` is read from its bytes), kept to go upstream as it was. ``fork``: as
        ``grant``'s. ``ci_attempt``: the CI's attempt, as the job's OIDC token says it (the runner's
        metadata does not). ``buildkite``: the Buildkite job its upload URL names
        (``/upload/buildkite/…``), whose build is one run."""
        project = metadata.project
        if not project:
            raise Unprocessable("metadata has no owner and repository: the aggregator keys runs by project")
        if not metadata.profile_md5:
            raise Unprocessable("metadata has no profileMd5: CodSpeed's upload protocol signs the profile's MD5")
        place = shard_of(metadata, buildkite)
        if (
            buildkite
            and buildkite.job
            and not self.ci_jobs.claim(project, buildkite.build, buildkite.job, metadata.profile_md5)
        ):
            raise Conflict(buildkite.same_job_again())  # before any attempt is joined or opened: one archive a job
        grant = self._grant(
            AskedUpload(
                project=project,
                run_id=place.run_id,
                shard=place.label,
                manifest=place.manifest,
                metadata=metadata,
                label=place.label,
                variant=place.variant,
                group=place.group,
                key=place.shard,
                sent=sent,
                fork=fork is not None,
                origin=fork or CiOrigin(ci_run_of(metadata, buildkite), ci_attempt),
                merged=buildkite is not None,
            )
        )
        return UploadAccepted(uploadUrl=grant.upload_url, runId=grant.run_id)

    def _grant(self, asked: AskedUpload) -> UploadGrant:
        """One upload granted: the run (or its next attempt) opened or joined, the shard's grant
        counted and recorded, its URL presigned. Every check is made before the first write. A run
        that is closing, or claimed for finalizing meanwhile, takes it only from its own CI attempt
        (``RunAttempts``), whose close decides by the CI's word whether to wait for it; else it goes to
        the run's next attempt (``domain.barrier``)."""
        for _ in range(GRANT_TRIES):
            granted = self._grant_in_current(asked)
            if granted is not None:
                return granted
        raise Busy(f"run {asked.run_id} of {asked.project} ended under {GRANT_TRIES} grants in a row: send it again")

    def _grant_in_current(self, asked: AskedUpload) -> UploadGrant | None:
        """The grant in the run's current attempt; None when that attempt ended meanwhile."""
        project, group, metadata = asked.project, asked.group, asked.metadata
        now = self.clock()
        run = self._current(asked, now)
        key, manifest = asked.stored_as, asked.manifest
        refuse_skipped(run, asked)
        admit(run, asked, manifest)  # every check before the first write: a refusal changes nothing
        if not self._joined(run, asked, manifest):
            return None
        if asked.marks_tokenless(run):  # no token: it may not speak unchecked
            self.runs.mark_tokenless(project, run.run_id, checked=asked.fork)
        # counted under its bound, not checked on a read alone; closing or claimed since, or full: look again
        if not self.closes.count_grant(project, run.run_id, asked.most_grants, closing=run.closing):
            return None
        upload_id = uuid.uuid4().hex
        self.shards.add_upload(
            project,
            run.run_id,
            GrantRecord(
                shard=key,
                upload_id=upload_id,
                metadata=metadata.wire(),
                size=asked.size,
                requested_at=f"{now:.6f}",
                label=asked.label if asked.label != key else None,
                executor=metadata.executor,
                group=group,
                sent=asked.sent,
                tokenless=metadata.tokenless,
                md5=metadata.profile_md5,
                origin=asked.origin,
            ),
        )
        key = bundle_key(project, run.run_id, key, upload_id)
        expires = self.settings.presign_expiry_seconds
        url, headers = self.store.presign_put(
            key, expires, size=asked.size, content_type=asked.content_type, md5=metadata.profile_md5, crc32=asked.crc32
        )
        return UploadGrant(
            upload_url=url,
            headers=headers,
            key=key,
            upload_id=upload_id,
            expires_in=expires,
            run_id=run.run_id,
            attempt=run.attempt,
            sent_on_arrival=run.sends_parts,
        )

    def _current(self, asked: AskedUpload, now: float) -> RunRecord:
        """The attempt the upload goes to, opened with what the upload says when it is the first."""
        metadata, group = asked.metadata, asked.group
        asked.manifest.admit(asked.shard)  # its own manifest first: a run it cannot join is neither opened nor changed
        return self.attempts.current(
            RunRecord(
                project=asked.project,
                run_id=asked.run_id,
                groups={group: asked.manifest},
                commit=metadata.commit_hash.lower(),
                head_commit=asked.head_commit,
                ref=metadata.ref,
                base_ref=metadata.base_ref,
                base_commit=asked.base_commit,
                base_ancestors=asked.base_ancestors if asked.base_commit else (),
                identity=RunIdentity.of(metadata.identity()),
                created_at=iso(now),
                deadline_at=int(now) + self.settings.run_deadline_seconds,
                variants=asked.variants(),
                ci_url=asked.page or ci_url(metadata),
                tokenless=metadata.tokenless and not asked.fork,
                fork=asked.fork,
                provider=metadata.repository_provider,
                ci_attempt=asked.origin.attempt,
            ),
            admit=lambda previous: admit(previous, asked, asked.manifest),
            parts=not asked.merged,
        )

    def _joined(self, run: RunRecord, asked: AskedUpload, manifest: Manifest) -> bool:
        """The run notes the upload's job group and variants it had not seen; False when it ended meanwhile."""
        project, group = asked.project, asked.group
        if group not in run.groups:
            if self.runs.add_group(project, run.run_id, group, manifest):
                run.groups[group] = manifest
            else:  # another upload added it meanwhile (its manifest stands), others filled the run, or it ended
                run = existing(self.runs.run_record(project, run.run_id), f"run {run.run_id} of {project}")
                if group not in run.groups:
                    admit(run, asked, manifest)
                    return False
        manifest.agree(run.groups[group], group)
        run.groups[group].admit(asked.shard)
        for kind in asked.variants():
            if kind not in run.variants and not self.runs.add_variant(project, run.run_id, kind):
                run = existing(self.runs.run_record(project, run.run_id), f"run {run.run_id} of {project}")
                admit(run, asked, manifest)  # others filled the run meanwhile; else it ended
                return False
        return True


def _check_pushed_part(request: ShardUploadRequest) -> None:
    """A pushed shard's part names the aggregator's run and the aggregator's own id for the shard
    (``pushed_part_id``, which the client writes with the same function): no other id can reach the
    upstream from a push, so a push can never stand in a runner job's place, nor one shard in another's."""
    part, executor = request.metadata.run_part, request.metadata.executor
    if part is None:
        raise Unprocessable("metadata has no runPart: a pushed shard names its run and its part, as the client writes")
    expected = pushed_part_id(request.shard, executor)
    if part.run_part_id != expected:
        raise Unprocessable(
            f"metadata.runPart.runPartId is {part.run_part_id!r}, not {expected!r}: a pushed shard goes under the "
            f"aggregator's own id for shard {request.shard} ({executor})"
        )
    if part.run_id != base_run_id(request.run_id):
        raise Unprocessable(
            f"metadata.runPart.runId is {part.run_id!r}, not {base_run_id(request.run_id)!r}: a pushed shard's part "
            "names the run it is pushed to"
        )
