"""Give back an upload grant its client will not use (``POST /v1/uploads/give-back``): ``push`` refused
its own bundle after its grant, or was interrupted before its PUT was answered. The grant's shard is
rejected with the client's reason, so no close waits for its URL. Only the grantee can: the call names
the grant's key, which only the grant's answer gave (a tokenless grant's public facts are anyone's)."""

from dataclasses import dataclass

from codspeed_rules.tar import BadBundle
from codspeed_wire.api import GiveBackAnswer

from ..adapters.bucket import Bucket
from ..adapters.ledger import Reads, Shards
from ..adapters.queues import FinalizeQueue
from ..domain.arrival import given_back
from ..domain.barrier import COUNTED
from ..domain.errors import Conflict, NotFound, Unprocessable
from ..domain.keys import parse_bundle_key
from ..domain.records import OPEN, ShardRecord
from ..domain.report import shown_as
from .reports import Reports


@dataclass
class GiveBackUpload:
    reads: Reads  # DynamoDB: the run and the grant named
    shards: Shards  # DynamoDB: the shard rejected with the client's reason
    store: Bucket  # S3: whether the grant's bundle is in the bucket (listed under its own key)
    queue: FinalizeQueue  # SQS: a closing run's barrier asked to look again
    reports: Reports

    def give_back(self, key: str, reason: str) -> GiveBackAnswer:
        """Every refusal changes nothing: a key that names no grant, a run that ended, a bundle already in
        the bucket (it counts: a bundle sent is never taken back), a grant given back already."""
        project, run_id, shard, upload_id = upload_named(key)
        view = self.reads.arrival_view(project, run_id, shard, upload_id)
        if view.run is None or view.upload is None:
            raise NotFound(f"no upload {upload_id} was granted for run {run_id} of {project}")
        run, counted = view.run, view.shard
        if _counted_otherwise(counted, upload_id):
            name = shown_as(shard, counted.label if counted else None)  # as its readers know it
            said = f"shard {name} is counted already (another upload of it): nothing waits for upload {upload_id}"
            return GiveBackAnswer(
                project=project, run_id=run_id, upload_id=upload_id, state="counted_already", reason=said
            )
        if run.state != OPEN:
            raise Conflict(f"run {run_id} of {project} is already {run.state}: nothing waits for that upload")
        if key in self.store.listed_under(key):
            raise Conflict(f"upload {upload_id}'s bundle is in the bucket: it counts, and is not given back")
        said = f"given back by its client before its bundle was sent: {reason}"
        if not self.shards.record_given_back(project, run_id, shard, upload_id, said):
            raise Conflict(f"upload {upload_id} of run {run_id} was given back already")
        self.reports.publish(project, run_id)
        if run.close.requested:
            self.queue.request(project, run_id, "arrival")  # its close may have waited for this one: it looks again
        return GiveBackAnswer(project=project, run_id=run_id, upload_id=upload_id, state="given_back", reason=said)


def upload_named(key: str) -> tuple[str, str, str, str]:
    """(project, run id, shard, upload id) a grant's key names (its answer's ``key``), or the refusal."""
    try:
        return parse_bundle_key(key)
    except BadBundle:
        raise Unprocessable(f"{key!r} is not an upload's key (its grant's answer says it: key)") from None


def _counted_otherwise(shard: ShardRecord | None, upload_id: str) -> bool:
    """The shard is counted from another upload (a push of it again given back): no close waits for this one."""
    noted = (shard.upload_id, shard.noted_upload) if shard is not None else ()
    return shard is not None and shard.state in COUNTED and not {upload_id, given_back(upload_id)} & set(noted)
