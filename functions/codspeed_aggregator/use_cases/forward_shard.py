"""Send one shard of a parts run upstream the moment it is counted: its own run part, under
the run part id it was uploaded with (a pushed shard's, ``uploads.pushed_part_id``), as it came.
A re-run shard replaces its part upstream; the run's finalizer sends only what no shard sent
(what it carries, a shard whose send failed)."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.bucket import Bucket
from ..adapters.ledger import Parts, Reads
from ..adapters.metrics import Metrics
from ..adapters.queues import FinalizeQueue
from ..domain.errors import existing
from ..domain.metadata import part_claim
from ..domain.records import ARRIVED, OPEN, RunRecord, ShardRecord, ShardSent, sent_as
from ..domain.upstream_parts import UpstreamPart, part_id
from ..settings import Settings
from .forward_part import ForwardPart
from .reports import Reports

log = logging.getLogger(__name__)


@dataclass
class ForwardShard:
    settings: Settings
    # DynamoDB: the run's record and the one shard (whether it is upstream); the parts, in a race with a close
    reads: Reads
    parts: Parts  # DynamoDB: the shard's claim (the one its run's finalizer takes) and its upstream answer
    store: Bucket  # S3: the run's plan, when a finalizer planned it while this shard was on its way
    queue: FinalizeQueue  # SQS: that finalizer's parts, asked again
    forwarder: ForwardPart
    reports: Reports
    metrics: Metrics
    clock: Callable[[], float] = time.time

    def forward(self, project: str, run_id: str, name: str) -> str:
        """Send shard ``name`` as it is counted now; answers what became of it.

        The claim is the shard's runPartId's, not its version's: a version re-pushed while an
        older one is sent waits, and the holder sends it after its own (the upstream keeps the
        last PUT of a runPartId, so the newer must land last)."""
        run, shard = self.reads.shard_view(project, run_id, name)  # not the run whole: its size does not matter
        if shard is None or not _counted_in_open(run, shard):
            return "not_open"  # ended, or finalizing: its finalizer sends what is not upstream
        if sent_as(shard) == _version(shard):
            return "upstream"  # a second delivery of one arrival
        claim = part_claim(UpstreamPart((name,), merged=False, group=shard.group), {name: shard})
        if not self.parts.claim_shard(project, run_id, claim, int(self.clock()), self.settings.finalize_lease_seconds):
            return "not_claimed"  # its holder sends this version after its own, or the run's finalizer does
        while not self._send(project, run_id, shard, claim):
            run, newer = self.reads.shard_view(project, run_id, name)  # re-pushed while it was sent: the newer now
            if newer is None or not _counted_in_open(run, newer) or sent_as(newer) == _version(newer):
                self.parts.release_part(project, run_id, claim)
                break
            shard = newer
        self.metrics.add("ShardsForwarded", 1, "Count")
        self._finalizer_waits(project, run_id, self.reports.publish(project, run_id))
        return "forwarded"

    def _send(self, project: str, run_id: str, shard: ShardRecord, claim: str) -> bool:
        """Send one version of the shard and record it; False when a newer one was counted meanwhile
        (the claim still held). A send that fails is said on the run, and the message's retry sends
        it again."""
        held = _version(shard)
        try:
            answer = self.forwarder.send_as_sent(shard, project, run_id)
        except Exception as exc:
            self.metrics.add("ShardForwardFailed", 1, "Count")
            if not self._record(project, run_id, shard, claim, ShardSent(held, error=str(exc))):
                self.parts.release_part(project, run_id, claim)
            self.reports.publish(project, run_id)  # the run says so; the message's retry sends it again
            raise
        return self._record(project, run_id, shard, claim, ShardSent(held, **answer.fields()))

    def _record(self, project: str, run_id: str, shard: ShardRecord, claim: str, sent: ShardSent) -> bool:
        """Record a send; a write that fails (a throttle, an access denied) releases the claim before
        the message is retried, so the run never waits out a lease nobody holds."""
        try:
            return self.parts.record_sent_shard(project, run_id, shard, claim, sent)
        except Exception:
            try:
                self.parts.release_part(project, run_id, claim)
            except Exception:  # the lease ends it: logged, and the write's own error is the one raised
                log.exception("the claim of shard %s of %s %s was not released", shard.name, project, run_id)
            raise

    def _finalizer_waits(self, project: str, run_id: str, read: RunRecord | None) -> None:
        """A close that came while this shard was sent: its finalizer planned the shard, found it
        claimed, and left it. Each of its parts not forwarded yet is asked again: the one this
        shard is, is recorded as forwarded without a second send. ``read``: the run as the report
        read it, after the send was recorded (else its plan is read)."""
        recorded = read.forward.plan if read is not None else self.reads.plan_record(project, run_id)
        if recorded is None or not recorded.written:
            return
        # a close came meanwhile: rare, and once a run
        run = existing(self.reads.run_with_parts(project, run_id), f"run {run_id} of {project}")
        for index in self.store.read_plan(project, run_id, recorded.version).todo:
            if str(index) not in run.forwarded_parts:
                self.queue.request(project, run_id, "part", part=index)


def _counted_in_open(run: RunRecord | None, shard: ShardRecord) -> bool:
    """A shard counted in a run still open: its finalizer sends what is not upstream once it ends."""
    return run is not None and run.state == OPEN and shard.state == ARRIVED


def _version(shard: ShardRecord) -> str:
    """What the shard holds as counted now (``upstream_parts.part_id``): what a send of it is recorded as."""
    return part_id(UpstreamPart((shard.name,), merged=False), {shard.name: shard})
