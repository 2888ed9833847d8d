"""Take an unmodified CodSpeed runner's upload (``POST /upload``, answered as CodSpeed answers): which
run and which shard it is (``domain.drop_in``), then granted as any upload is
(``services.upload_grants``); a Buildkite job's archive once a job."""

from dataclasses import dataclass

from codspeed_wire.upstream import UploadAccepted, UploadMetadata

from ..adapters.ledger import CiJobs
from ..domain.asked_upload import AskedUpload
from ..domain.closing import CiOrigin
from ..domain.drop_in import BuildkiteJob, ci_run_of, shard_of
from ..domain.errors import Conflict, Unprocessable
from ..domain.records import SentPost
from ..services.upload_grants import UploadGrants


@dataclass
class RunnerUpload:
    grants: UploadGrants  # DynamoDB and S3: the run joined or opened, the grant recorded, its URL presigned
    ci_jobs: CiJobs  # DynamoDB: the archive a Buildkite job's upload URL first took

    def accept(  # noqa: PLR0913 -- the POST, and what its route and token say beside it
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
        grant = self.grants.grant(
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
        return UploadAccepted(uploadUrl=grant.upload_url, runId=grant.run_id or place.run_id)
