"""An upload granted in a run: the run, or its next attempt, opened or joined; the grant counted and
recorded; its URL presigned. Every check is made before the first write. Both ways in use it: a pushed
shard (``request_upload``) and a CodSpeed runner's POST (``runner_upload``)."""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_wire.api import UploadGrant

from ..adapters.bucket import Bucket
from ..adapters.ledger import Closes, Runs, Shards
from ..domain.asked_upload import AskedUpload, admit, refuse_skipped
from ..domain.attempts import RunAttempt
from ..domain.errors import Busy, existing
from ..domain.identity import RunIdentity
from ..domain.keys import bundle_key
from ..domain.manifest import Manifest
from ..domain.metadata import ci_url
from ..domain.records import GrantRecord, RunRecord
from ..domain.timestamps import iso
from ..settings import Settings
from .run_attempts import RunAttempts

GRANT_TRIES = 3  # a run claimed for finalizing while an upload was granted in it: the grant goes to its next attempt


@dataclass
class UploadGrants:
    settings: Settings
    runs: Runs  # DynamoDB: the run item, opened here
    closes: Closes  # DynamoDB: the grant counted on the run's item, under its close and its bound
    shards: Shards  # DynamoDB: upload requests, and shards an attempt inherits
    store: Bucket  # S3: presigned PUTs under bundles/
    attempts: RunAttempts  # the run, or its next attempt, an upload goes to
    clock: Callable[[], float] = time.time

    def grant(self, asked: AskedUpload) -> UploadGrant:
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
        if not self.closes.count_grant(project, run.run_id, asked.most_grants, closing=run.close.requested):
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
            attempt=run.attempt.number,
            sent_on_arrival=run.forward.sends_parts,
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
                attempt=RunAttempt(ci=asked.origin.attempt),
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
