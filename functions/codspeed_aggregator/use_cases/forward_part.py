"""Forward one upload of a run: splice (or merge) its shards into a spooled archive, or take a
lone shard's archive as it was sent, announce it upstream (POST) and send it (PUT)."""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from codspeed_rules.index import Index, IndexUnreadable, MadeFrom
from codspeed_rules.runner_json import compact

from ..adapters.bucket import Bucket, MissingObject, ObjectReader, SpoolWriter
from ..adapters.ledger import Parts, Shards
from ..adapters.metrics import Metrics
from ..adapters.upstream_http import UpstreamClient, UpstreamRefused
from ..domain.attempts import base_run_id
from ..domain.forward_plan import PartPlan
from ..domain.keys import index_key, spool_key
from ..domain.merge import MergeResult, ShardBundle, merge_bundles
from ..domain.metadata import (
    MergedPart,
    as_carried,
    as_sent_metadata,
    combined_run_id,
    merged_metadata,
    names_archive,
    with_run_id,
    without_run_part,
)
from ..domain.part_answers import Announced, Delivered
from ..domain.records import OPENED, NormalizedCopy, SentPost, ShardRecord
from ..domain.splice import NormalizedShard, splice
from ..domain.splice_check import IndexMismatch
from ..settings import Settings

log = logging.getLogger(__name__)


@dataclass
class ForwardPart:
    settings: Settings
    shards: Shards  # DynamoDB: the CodSpeed metadata each shard was uploaded with
    parts: Parts  # DynamoDB: the upstream's answer to a part's POST, recorded before its PUT
    store: Bucket  # S3: bundles/ and normalized/ read; spool/ written and read back
    upstream: UpstreamClient  # the upstream (CodSpeed): POST metadata, PUT archive
    metrics: Metrics

    def sent_metadata(self, project: str, run_id: str, shard: ShardRecord) -> dict[str, Any] | None:
        """The CodSpeed metadata a shard was uploaded with (None for a shard carried from another run)."""
        return self.shards.upload_metadata(project, run_id, shard.upload_id) if shard.upload_id else None

    def opened_metadata(self, project: str, run_id: str) -> dict[str, Any] | None:
        """The CodSpeed metadata the job that opened the run stated (``codspeed-client open``), if any."""
        return self.shards.upload_metadata(project, run_id, OPENED)

    def send_merged(self, part: PartPlan, project: str, run_id: str, announced: Announced | None) -> Delivered:
        """Send the part's shards merged: its number among its group's merged parts, under the run's
        metadata, naming the shards it carried. A POST already answered for the same bytes (the
        merge is deterministic) is not made again: the archive goes to the URL it gave."""
        # Spooled to S3 (a multipart upload), not to /tmp: a part's size is bounded by S3, and the
        # MD5 the upstream wants before the PUT is taken while the merge writes.
        shards = [part.shards[name] for name in part.upload.shards]
        sink, result = self._merge_part(spool_key(project, run_id, part.index), shards)
        sent = [(s, self.sent_metadata(project, run_id, s)) for s in shards]
        upload = part.upload
        merged = MergedPart(
            base_run_id(run_id), upload.key, upload.group, part.number, part.group_parts, sent, part.carried
        )
        described = partial(merged_metadata, part.base_metadata, merged, result.md5)
        outgoing = _Outgoing(self.store.reader(sink.key, sink.version_id), result.size, result.md5, True, described)
        if (metadata := described()).get("tokenless") is True:  # its POST's bytes made here: their hash said
            outgoing = replace(outgoing, post=SentPost(compact(metadata)))
        answer = self._deliver(project, run_id, part.index, outgoing, announced)
        return _with_run_hash(answer, outgoing, metadata)

    def send_as_sent(
        self,
        shard: ShardRecord,
        project: str,
        run_id: str,
        base_metadata: dict[str, Any] | None = None,
        index: int | None = None,
        announced: Announced | None = None,
    ) -> Delivered:
        """Send one shard's archive as it was sent: a runner's POST byte for byte, with its job's token
        while valid, when its metadata names this very archive; else its metadata (a carried
        shard's under ``base_metadata``)."""
        archive = self.store.reader(shard.bundle_key, shard.version_id)
        size, md5 = (shard.size, shard.md5) if shard.md5 and shard.size is not None else archive.digest()
        sent, post = self._as_uploaded(project, run_id, shard, base_metadata)
        outgoing = _Outgoing(archive, size, md5, shard.gzipped, partial(as_sent_metadata, sent, md5, shard.gzipped))
        if post is not None and shard.upload_id and names_archive(sent, md5, shard.gzipped):  # this very archive
            outgoing = replace(outgoing, post=post, token=post.token)
        answer = self._deliver(project, run_id, index, outgoing, announced)
        return _with_run_hash(answer, outgoing, sent)

    def _as_uploaded(
        self, project: str, run_id: str, shard: ShardRecord, base_metadata: dict[str, Any] | None
    ) -> tuple[dict[str, Any], SentPost | None]:
        """The metadata a shard goes under, and the runner's POST that sent it (a carried shard's:
        ``base_metadata``, no POST); a GitLab job's part under its pipeline's one run."""
        found = self.shards.upload_post(project, run_id, shard.upload_id, time.time()) if shard.upload_id else None
        sent, post = found or (as_carried(base_metadata, shard), None)
        if combined := combined_run_id(sent, run_id):
            sent = with_run_id(sent, combined)
            post = replace(post, body=compact(sent)) if post is not None else None
        if stripped := without_run_part(sent):  # a push on Buildkite: its metadata made again, as the runner's
            sent, post = stripped, None
        return sent, post

    def _deliver(
        self, project: str, run_id: str, index: int | None, outgoing: "_Outgoing", announced: Announced | None
    ) -> Delivered:
        """POST the upload's metadata (unless ``announced`` for these bytes already), then PUT the archive."""
        announce = partial(self._announce, project, run_id, index, outgoing)
        size, md5 = outgoing.size, outgoing.md5
        fresh = announced is None or announced.md5 != md5
        current = announce() if fresh or announced is None else announced
        try:
            self.upstream.put(current.upload_url, outgoing.archive, size, md5, gzipped=outgoing.gzipped)
        except UpstreamRefused:
            if fresh:
                raise
            current = announce()  # the URL of an earlier try is dead (expired, or refused): ask for a new one
            self.upstream.put(current.upload_url, outgoing.archive, size, md5, gzipped=outgoing.gzipped)
        finally:
            outgoing.archive.close()
        return Delivered(current.run_id, size, md5)

    def _merge_part(self, key: str, shards: list[ShardRecord]) -> tuple[SpoolWriter, MergeResult]:
        """Splice the shards' normalized copies; merge their bundles when one has none, or when
        a copy does not match its index (never trusted blindly)."""
        copies = {s.name: s.normalized for s in shards if s.normalized is not None}
        if len(copies) == len(shards):
            try:
                with self.store.spool(key) as sink:
                    result = splice(
                        [
                            NormalizedShard(
                                s.name,
                                tuple(s.pids),
                                self._index(s, copies[s.name]),
                                partial(self.store.open, copies[s.name].key, copies[s.name].version),
                            )
                            for s in shards
                        ],
                        sink,
                        level=self.settings.merge_level,
                    )
                self.metrics.add("PartsSpliced", 1, "Count")
                return sink, result
            except (IndexMismatch, MissingObject) as exc:  # MissingObject: a carried shard's copy expired
                log.warning("normalized copies of %s not spliced, merged instead: %s", key, exc)
                self.metrics.add("SpliceFallbacks", 1, "Count")
        with self.store.spool(key) as sink:
            bundles = [
                ShardBundle(s.name, tuple(s.pids), partial(self.store.open, s.bundle_key, s.version_id)) for s in shards
            ]
            result = merge_bundles(bundles, sink, level=self.settings.merge_level)
        return sink, result

    def _index(self, shard: ShardRecord, copy: NormalizedCopy) -> Index:
        try:
            index = Index.from_json(self.store.read_json(index_key(shard.bundle_key), copy.index_version))
        except IndexUnreadable as exc:
            raise IndexMismatch(f"the index of {shard.key}: {exc}") from exc
        if index.bundle != MadeFrom(shard.bundle_key, shard.version_id):
            raise IndexMismatch(f"the index of {shard.key} was made from another object ({index.bundle})")
        return index

    def _announce(self, project: str, run_id: str, index: int | None, outgoing: "_Outgoing") -> Announced:
        """POST an upload's metadata (a runner's POST's bytes when it goes as it came) and record
        the answer before the PUT (a retry re-PUTs there); a shard of a parts run (no ``index``) is
        announced again when it is sent again."""
        if outgoing.post is None:
            accepted = self.upstream.announce(outgoing.describe())
        else:
            post = outgoing.post
            accepted = self.upstream.announce(outgoing.describe(), post.body, post.user_agent, outgoing.token)
        announced = Announced(accepted.runId, accepted.uploadUrl, outgoing.md5)
        if index is not None:
            self.parts.record_announced_part(project, run_id, index, announced)
        return announced


@dataclass(frozen=True)
class _Outgoing:
    """An archive on its way upstream, and what announces it."""

    archive: ObjectReader  # read once, by the PUT
    size: int
    md5: str
    gzipped: bool
    describe: Callable[[], dict[str, Any]]  # its metadata, made when the POST is
    post: SentPost | None = None  # a runner's POST, sent as it came
    token: str | None = None  # that runner job's token, while valid


def _with_run_hash(answer: Delivered, outgoing: "_Outgoing", sent: dict[str, Any]) -> Delivered:
    """A tokenless upload's answer with its Run Hash, as the runner prints it: the sha256 of the POST's
    bytes CodSpeed received (where they are not the job's: a GitLab job's run id rewritten, a merge)."""
    if sent.get("tokenless") is True and outgoing.post is not None:
        return replace(answer, run_hash=hashlib.sha256(outgoing.post.body).hexdigest())
    return answer
