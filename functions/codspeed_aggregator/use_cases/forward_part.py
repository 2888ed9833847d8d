"""Forward one upload of a run: splice (or merge) its shards into a spooled archive, or take a
lone shard's archive as it was sent, announce it upstream (POST) and send it (PUT)."""

import logging
import time
from dataclasses import dataclass
from functools import partial

from ..adapters.bucket import Bucket, MissingObject
from ..adapters.ledger import Parts, Shards
from ..adapters.metrics import Metrics
from ..adapters.upstream_http import UpstreamClient, UpstreamRefused
from ..domain.keys import index_key, spool_key
from ..domain.ledger import OPENED, SentPost, ShardRecord, base_run_id
from ..domain.merge import ShardBundle, merge_bundles
from ..domain.metadata import MergedPart, as_carried, as_sent_metadata, merged_metadata, names_archive
from ..domain.splice import IndexMismatch, NormalizedShard, splice
from ..domain.upstream_parts import UpstreamPart
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

    def sent_metadata(self, project: str, run_id: str, shard: ShardRecord) -> dict | None:
        """The CodSpeed metadata a shard was uploaded with (None for a shard carried from another run)."""
        return self.shards.upload_metadata(project, run_id, shard.upload_id) if shard.upload_id else None

    def opened_metadata(self, project: str, run_id: str) -> dict | None:
        """The CodSpeed metadata the job that opened the run stated (``codspeed-client open``), if any."""
        return self.shards.upload_metadata(project, run_id, OPENED)

    def send_merged(
        self,
        shards: list[ShardRecord],
        upload: UpstreamPart,
        project: str,
        run_id: str,
        base_metadata: dict | None,
        carried: dict,
        index: int | None,
        number: int,
        group_parts: int,
        announced: dict | None,
    ) -> dict:
        """Send the shards merged: part ``number`` of its group's ``group_parts``, under
        ``base_metadata``, naming the shards it ``carried``. A POST already answered for the same
        bytes (the merge is deterministic) is not made again: the archive goes to the URL it gave."""
        # Spooled to S3 (a multipart upload), not to /tmp: a part's size is bounded by S3, and the
        # MD5 the upstream wants before the PUT is taken while the merge writes.
        sink, result = self._merge_part(spool_key(project, run_id, index), shards)
        archive = self.store.reader(sink.key, sink.version_id)
        sent = [(s, self.sent_metadata(project, run_id, s)) for s in shards]
        part = MergedPart(base_run_id(run_id), upload.run_part_id, upload.group, number, group_parts, sent, carried)
        describe = partial(merged_metadata, base_metadata, part, result.md5)
        return self._deliver(
            project, run_id, index, archive, result.size, result.md5, True, describe, None, None, announced
        )

    def send_as_sent(
        self,
        shard: ShardRecord,
        project: str,
        run_id: str,
        base_metadata: dict | None = None,
        index: int | None = None,
        announced: dict | None = None,
    ) -> dict:
        """Send one shard's archive as it was sent: a runner's POST byte for byte, with its job's token
        while valid, when its metadata names this very archive; else its metadata (a carried
        shard's under ``base_metadata``)."""
        archive = self.store.reader(shard.key, shard.version_id)
        size, md5 = archive.digest()
        found = self.shards.upload_post(project, run_id, shard.upload_id) if shard.upload_id else None
        sent, post = found or (as_carried(base_metadata, shard), None)
        describe = partial(as_sent_metadata, sent, md5, shard.gzipped)
        token = None
        if post is not None and names_archive(sent, md5, shard.gzipped):  # it names this very archive
            token = self.shards.job_token(project, run_id, shard.upload_id, time.time())
        else:
            post = None
        return self._deliver(
            project, run_id, index, archive, size, md5, shard.gzipped, describe, post, token, announced
        )

    def _deliver(self, project, run_id, index, archive, size, md5, gzipped, describe, post, token, announced) -> dict:
        """POST the upload's metadata (unless ``announced`` for these bytes already), then PUT the archive."""
        announce = partial(self._announce, project, run_id, index, describe, md5, post, token)
        fresh = announced is None or announced["md5"] != md5
        if fresh:
            announced = announce()
        try:
            self.upstream.put(announced["upload_url"], archive, size, md5, gzipped=gzipped)
        except UpstreamRefused:
            if fresh:
                raise
            announced = announce()  # the URL of an earlier try is dead (expired, or refused): ask for a new one
            self.upstream.put(announced["upload_url"], archive, size, md5, gzipped=gzipped)
        finally:
            archive.close()
        return {"run_id": announced["run_id"], "size": size, "md5": md5}

    def _merge_part(self, key: str, shards: list[ShardRecord]):
        """Splice the shards' normalized copies; merge their bundles when one has none, or when
        a copy does not match its index (never trusted blindly)."""
        if all(s.normalized for s in shards):
            try:
                with self.store.spool(key) as sink:
                    result = splice(
                        [
                            NormalizedShard(
                                s.name,
                                tuple(s.pids),
                                self._index(s),
                                partial(self.store.open, s.normalized["key"], s.normalized["version"]),
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
                ShardBundle(s.name, tuple(s.pids), partial(self.store.open, s.key, s.version_id)) for s in shards
            ]
            result = merge_bundles(bundles, sink, level=self.settings.merge_level)
        return sink, result

    def _index(self, shard: ShardRecord) -> dict:
        index = self.store.read_json(index_key(shard.key), shard.normalized.get("index_version"))
        made_from = index.get("bundle") or {}
        if made_from.get("key") != shard.key or made_from.get("version") != shard.version_id:
            raise IndexMismatch(f"the index of {shard.key} was made from another object ({made_from})")
        return index

    def _announce(
        self, project: str, run_id: str, index: int | None, describe, md5: str, post: SentPost | None, token: str | None
    ) -> dict:
        """POST an upload's metadata (``post``'s bytes when a runner's POST goes as it came) and record
        the answer before the PUT (a retry re-PUTs there); a shard of an eager run (no ``index``) is
        announced again when it is sent again."""
        if post is None:
            accepted = self.upstream.announce(describe())
        else:
            accepted = self.upstream.announce(describe(), post.body, post.user_agent, token)
        announced = {"run_id": accepted.runId, "upload_url": accepted.uploadUrl, "md5": md5}
        if index is not None:
            self.parts.record_announced_part(project, run_id, index, announced)
        return announced
