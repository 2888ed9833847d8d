"""Grant an upload of a shard pushed by ``codspeed-client`` (``POST /v1/uploads``): its request
checked, then granted as any upload is (``services.upload_grants``), opening the run, or its next
attempt, on the first."""

import re
from dataclasses import dataclass

from codspeed_rules.names import EXECUTOR_PATTERN, shard_key
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import ShardUploadRequest, UploadGrant
from codspeed_wire.upstream import BUILDKITE

from ..domain.asked_upload import AskedUpload
from ..domain.attempts import base_run_id
from ..domain.closing import CiOrigin
from ..domain.errors import Unprocessable
from ..domain.manifest import Manifest
from ..domain.records import SentPost
from ..services.upload_grants import UploadGrants
from ..settings import Settings


@dataclass
class RequestUpload:
    settings: Settings
    grants: UploadGrants  # DynamoDB and S3: the run joined or opened, the grant recorded, its URL presigned

    def grant(self, request: ShardUploadRequest, fork: CiOrigin | None = None) -> UploadGrant:
        """``fork``: sent without a token by a fork's pull request, the Actions run and attempt GitHub
        vouched for (``fork_pull_requests``): its CI run and attempt, whatever the request says."""
        origin = fork or CiOrigin(request.ci_run, request.ci_attempt)
        self._check_size(request.size, fork is not None)
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
        _check_pushed_part(request)
        # Two executors' shard 1 are two shards: counted, reported and forwarded apart.
        return self.grants.grant(
            AskedUpload(
                project=request.project,
                run_id=request.run_id,
                shard=request.shard,
                manifest=_manifest(request),
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

    def _check_size(self, size: int, fork: bool) -> None:
        if size > self.settings.max_bundle_bytes:
            raise Unprocessable(f"size {size} is over the limit of {self.settings.max_bundle_bytes} bytes")
        if fork and size > self.settings.tokenless_max_bundle_bytes:
            raise Unprocessable(
                f"size {size} is over the limit of {self.settings.tokenless_max_bundle_bytes} "
                "bytes for a shard sent without a token (the aggregator's TokenlessMaxBundleBytes)"
            )


def _manifest(request: ShardUploadRequest) -> Manifest:
    """The shards the push says its run expects: named (``--expect``), counted (``--shard I/N``), or not said."""
    if request.expect is not None:
        return Manifest(names=tuple(request.expect))
    return Manifest(total=request.total, indexed=True) if request.total is not None else Manifest()


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
