"""The aggregator's use cases. Handlers call exactly one of these; these call the domain
and the adapters, and know nothing of Lambda events."""

import logging
import threading
import time
from urllib.parse import quote
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from collections.abc import Callable
from functools import partial

from codspeed_rules.bundle import VALGRIND
from codspeed_rules.normalize import NotNormalized
from codspeed_wire.api import CloseAnswer, CloseRequest, ShardUploadRequest, UploadGrant
from codspeed_wire.report import Report, render_markdown
from codspeed_wire.upstream import UploadAccepted, UploadMetadata

from .adapters.bundle_store import BundleStore, MissingObject
from .adapters.finalize_queue import FinalizeQueue
from .adapters.github_status import GitHubStatuses
from .adapters.metrics import CloudWatchMetrics
from .adapters.ledger_table import DynamoLedger, SnapshotContended
from .adapters.upstream_http import UpstreamClient, UpstreamError, UpstreamRefused
from .auth import signed_query
from .domain.baseline import Completion, branch_of, complete
from .domain.bundle import normalizing, validate_bundle
from .domain.errors import BadBundle, Conflict, NotFound, Unprocessable
from .domain.keys import bundle_key, index_key, normalized_key, parse_bundle_key, run_bundles_prefix, spool_key
from .domain.drop_in import shard_of
from .domain.ledger import (
    ARRIVED, CLOSED_EMPTY, ENDED, FORWARD_FAILED, FORWARDED, OPEN, RunRecord, ShardRecord, Snapshot,
    UploadRecord, attempt_run_id,
)
from .domain.manifest import Manifest
from .domain.merge import ShardBundle, merge_bundles
from .domain.splice import IndexMismatch, NormalizedShard, splice
from .domain.notification import commit_status
from .domain.metadata import as_sent_metadata, check_identity, ci_url, merged_metadata
from .domain.uploads import Upload, plan_forward
from .domain.report import build_report
from .domain.results import measured
from .settings import Settings

log = logging.getLogger(__name__)


BASELINE_LOOKUP_SECONDS = 60


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class ForwardPlan:
    run: RunRecord
    shards: dict[str, ShardRecord]  # arrived and carried, by name
    completion: Completion
    baseline_run: str | None
    base_metadata: dict | None
    uploads: list[Upload]


@dataclass
class Aggregator:
    settings: Settings
    ledger: DynamoLedger
    store: BundleStore
    queue: FinalizeQueue
    upstream: UpstreamClient
    statuses: GitHubStatuses | None = None  # commit statuses on GitHub, when configured
    metrics: CloudWatchMetrics | None = None
    clock: Callable[[], float] = time.time
    page_key: bytes | None = None  # signs run pages' links (auth.page_key)
    _baselines: dict = field(default_factory=dict, init=False, repr=False)  # (project, run) -> its Report
    _latest: dict = field(default_factory=dict, init=False, repr=False)  # (project, branch) -> (run, when looked up)
    _held: threading.local = field(default_factory=threading.local, init=False, repr=False)  # reports_held, per thread

    def _metric(self, name: str, value: float = 1, unit: str = "Count") -> None:
        if self.metrics:
            self.metrics.add(name, value, unit)

    # -- uploads -------------------------------------------------------------------

    def request_upload(self, request: ShardUploadRequest) -> UploadGrant:
        if request.size > self.settings.max_bundle_bytes:
            raise Unprocessable(f"size {request.size} is over the limit of {self.settings.max_bundle_bytes} bytes")
        if request.metadata.project and request.metadata.project != request.project:
            raise Unprocessable(
                f"metadata names project {request.metadata.project!r} but the request is for {request.project!r}"
            )
        if request.expect is not None:
            manifest = Manifest(names=tuple(request.expect))
        elif request.total is not None:
            manifest = Manifest(total=request.total, indexed=True)
        else:
            manifest = Manifest()
        return self._grant(
            request.project, request.run_id, request.shard, manifest, request.metadata,
            size=request.size, content_type="application/gzip", crc32=request.crc32,
        )

    def accept_drop_in(self, metadata: UploadMetadata) -> UploadAccepted:
        """``POST /upload`` as CodSpeed answers it: a runner pointed at us becomes a shard
        (which run and which shard: ``domain.drop_in``). Its upload URL signs the runner's MD5,
        and only that: the runner sends the archive's own type and encoding."""
        project = metadata.project
        if not project:
            raise Unprocessable("metadata has no owner and repository: the aggregator keys runs by project")
        if not metadata.profile_md5:
            raise Unprocessable("metadata has no profileMd5: CodSpeed's upload protocol signs the profile's MD5")
        place = shard_of(metadata)
        grant = self._grant(project, place.run_id, place.shard, place.manifest, metadata, size=None, content_type=None,
                            crc32=None, label=place.label, variant=place.variant)
        return UploadAccepted(uploadUrl=grant.upload_url, runId=grant.run_id)

    def _grant(self, project, run_id, shard, manifest, metadata, *, size, content_type, crc32,
               label=None, variant=None) -> UploadGrant:
        now = self.clock()
        run = self._current_attempt(RunRecord(
            project=project, run_id=run_id, manifest=manifest, commit=metadata.commit_hash.lower(),
            ref=metadata.ref, base_ref=metadata.base_ref, identity=metadata.identity(),
            created_at=iso(now), deadline_at=int(now) + self.settings.run_deadline_seconds,
            variants=(variant,) if variant else (), ci_url=ci_url(metadata),
        ))
        if run.closing:
            raise Conflict(f"run {run.run_id} of {project} is closing: it takes no more shards "
                           "(a shard pushed after the run is forwarded starts its next attempt)")
        run.manifest.admit(shard)
        if variant and variant not in run.variants and not self.ledger.add_variant(project, run.run_id, variant):
            raise Conflict(f"run {run.run_id} of {project} is closing: it takes no more shards")
        upload_id = uuid.uuid4().hex
        self.ledger.add_upload(project, run.run_id, UploadRecord(
            shard=shard, upload_id=upload_id, metadata=metadata.wire(), size=size, requested_at=f"{now:.6f}",
            label=label if label != shard else None, executor=metadata.executor,
        ))
        key = bundle_key(project, run.run_id, shard, upload_id)
        expires = self.settings.presign_expiry_seconds
        url, headers = self.store.presign_put(key, expires, size=size, content_type=content_type,
                                              md5=metadata.profile_md5, crc32=crc32)
        return UploadGrant(upload_url=url, headers=headers, key=key, upload_id=upload_id, expires_in=expires,
                           run_id=run.run_id, attempt=run.attempt)

    def _current_attempt(self, opening: RunRecord) -> RunRecord:
        """The run an upload goes to: the run as first opened, or when that one has ended
        (forwarded, or being finalized: a CI re-run, or a shard that came too late), its next
        attempt. A next attempt keeps the manifest and starts with the shards counted before,
        so it is complete, and forwarded again, as soon as the re-run shards are in."""
        base_id, previous = opening.run_id, None
        for attempt in range(1, self.settings.max_attempts + 1):
            opening.run_id, opening.attempt = attempt_run_id(base_id, attempt), attempt
            if previous is not None:
                existing = self.ledger.run_record(opening.project, opening.run_id)  # one read, not a copy per upload
                if existing is not None:
                    if existing.state not in ENDED:
                        return existing
                    previous = existing
                    continue
                opening.manifest, opening.identity = previous.manifest, previous.identity
                opening.variants = tuple(sorted({*previous.variants, *opening.variants}))
                opening.arrived_count = self.ledger.inherit_arrived(opening.project, previous.run_id, opening.run_id)
            run, created = self.ledger.open_run(opening)
            if created:
                return run
            if attempt == 1:
                opening.manifest.agree(run.manifest)
                check_identity(run.identity, opening.identity)
            if run.state not in ENDED:
                return run
            previous = run
        raise Conflict(f"run {base_id} of {opening.project} was forwarded {self.settings.max_attempts} times: "
                       "it takes no more attempts")

    # -- arrivals ------------------------------------------------------------------

    ARRIVAL_METRICS = {"recorded": "ShardsCounted", "duplicate": "DuplicatesAbsorbed", "rejected": "BundlesRejected",
                       "late": "LateBundles", "ignored": "ObjectsIgnored"}

    def record_arrival(self, key: str, size: int | None = None, version_id: str | None = None) -> str:
        """Validate and count one bundle that landed in the bucket; answers what happened.
        The object version validated is the one recorded, and the only one ever merged."""
        outcome = self._arrival(key, size, version_id)
        self._metric(self.ARRIVAL_METRICS[outcome])
        return outcome

    def _arrival(self, key: str, size: int | None, version_id: str | None) -> str:
        try:
            project, run_id, shard, upload_id = parse_bundle_key(key)
        except BadBundle as exc:
            log.warning("ignored object: %s", exc)
            return "ignored"
        view = self.ledger.arrival_view(project, run_id, shard, upload_id)
        if view.run is None or view.upload is None:
            log.warning("ignored object %s: no upload was granted for it", key)
            return "ignored"
        upload = view.upload
        if self._seen(view.shard, upload):
            if view.run.state == OPEN and view.complete():
                self.queue.request(project, run_id, "complete")  # in case the first delivery died before asking
            self.publish(project, run_id)  # in case the first delivery died before publishing
            return "duplicate"  # absorbed before any download
        try:
            if size is not None and upload.size is not None and size != upload.size:
                raise BadBundle(f"the bundle is {size} bytes but {upload.size} were declared")
            summary, version_id, normalized = self._validate(key, version_id, upload.executor)
        except BadBundle as exc:
            if not self.ledger.record_rejection(project, run_id, shard, upload_id, str(exc)):
                return "duplicate"
            self.publish(project, run_id)
            return "rejected"
        record = ShardRecord(
            name=shard, state=ARRIVED, upload_id=upload_id, key=key, size=size or upload.size,
            benchmarks=summary.benchmarks, benchmark_names=summary.benchmark_names, pids=summary.pids,
            results=measured(summary.results),
            arrived_at=iso(self.clock()), label=upload.label, executor=upload.executor, gzipped=summary.gzipped,
            version_id=version_id, normalized=normalized,
        )
        outcome = self._count(project, run_id, record, upload, view.shard)
        if outcome != "run_not_open":
            return outcome
        # Granted before the run's close, in after it was finalized: never a yes and a drop. The
        # bundle counts in the run's next attempt (forwarded again once complete), and shows
        # late in this one.
        run, now = view.run, self.clock()
        following = self._current_attempt(RunRecord(
            project=project, run_id=run.run_id.split("~", 1)[0], manifest=run.manifest, commit=run.commit, ref=run.ref,
            base_ref=run.base_ref, identity=run.identity, created_at=iso(now),
            deadline_at=int(now) + self.settings.run_deadline_seconds, variants=run.variants, ci_url=run.ci_url,
        ))
        self.ledger.copy_upload_metadata(project, run_id, following.run_id, upload_id)
        current = self.ledger.arrival_view(project, following.run_id, shard, upload_id).shard
        if self._count(project, following.run_id, record, upload, current) == "run_not_open":
            raise Conflict(f"run {following.run_id} of {project} ended while a late bundle was counted in it: retried")
        reason = f"arrived after the run was finalized: counted in attempt {following.attempt} ({following.run_id})"
        noted = self.ledger.record_late(project, run_id, record, reason)
        self.publish(project, run_id)
        return "late" if noted else "duplicate"

    def _validate(self, key: str, version_id: str | None, executor: str):
        """Validate a bundle; a valgrind one is also made ready to splice in the same pass: one the
        client normalized is verified (then it is its own normalized copy), any other is normalized
        into a copy. Answers (summary, version validated, where the copy and its index are)."""
        with self.store.open(key, version_id) as stream:
            if executor != VALGRIND:
                return validate_bundle(stream, executor), stream.version_id, None
            version_id = stream.version_id
            try:
                return self._validate_normalizing(key, stream, executor, verify=True)
            except NotNormalized as exc:
                log.warning("%s is marked as normalized and is not (%s): normalized again", key, exc)
                self._metric("NormalizedBundlesRedone")
        with self.store.open(key, version_id) as stream:
            return self._validate_normalizing(key, stream, executor, verify=False)

    def _validate_normalizing(self, key: str, stream, executor: str, verify: bool):
        with self.store.spool(normalized_key(key)) as sink:
            reading = normalizing(sink, self.settings.merge_level, verify=verify)
            summary = validate_bundle(stream, executor, gunzip=reading.gunzip, tap=reading.tap)
            index = reading.close(summary.listing)
            if index is None or reading.verifier is not None:
                sink.abandon()  # nothing to keep: a tar that could not be cut, or the bundle is its own copy
        if index is None:
            return summary, stream.version_id, None
        index["bundle"] = {"key": key, "version": stream.version_id}
        index_version = self.store.put_json(index_key(key), index)
        copy = {"key": key, "version": stream.version_id} if reading.verifier is not None else \
            {"key": normalized_key(key), "version": sink.version_id}
        return summary, stream.version_id, {**copy, "index_version": index_version}

    def _count(self, project: str, run_id: str, record: ShardRecord, upload: UploadRecord,
               shard: ShardRecord | None) -> str:
        """Count a validated bundle in a run, once; publish; ask to finalize when it completed the run."""
        if self._seen(shard, upload):
            return "duplicate"
        outcome = self.ledger.record_arrival(project, run_id, record, upload.requested_at, shard)
        while outcome == "changed":  # another upload of this shard was counted meanwhile: look again
            shard = self.ledger.arrival_view(project, run_id, record.name, upload.upload_id).shard
            if self._seen(shard, upload):
                return "duplicate"
            outcome = self.ledger.record_arrival(project, run_id, record, upload.requested_at, shard)
        if outcome == "run_not_open":
            return outcome
        self.publish(project, run_id)
        after = self.ledger.run_record(project, run_id)
        if after.state == OPEN and after.complete(after.arrived_count):
            self.queue.request(project, run_id, "complete")
        return outcome

    @staticmethod
    def _seen(shard: ShardRecord | None, upload: UploadRecord) -> bool:
        """This upload was handled already, or a later one of the same shard was counted."""
        if shard is None:
            return False
        if upload.upload_id in (shard.upload_id, shard.noted_upload):
            return True
        return shard.requested_at is not None and shard.requested_at >= upload.requested_at

    # -- closing and finalizing ------------------------------------------------------

    def close(self, request: CloseRequest, reason: str = "close") -> CloseAnswer:
        snapshot = self.ledger.snapshot(request.project, request.run_id)
        if snapshot is None:
            raise NotFound(f"no run {request.run_id} for project {request.project}")
        expected = snapshot.run.manifest.expected_names()
        unknown = [name for name in request.skip if expected is not None and name not in expected]
        if unknown:
            raise Unprocessable(f"cannot skip {', '.join(unknown)}: not in the run's manifest ({snapshot.run.manifest.describe()})")
        state = snapshot.run.state
        if state != OPEN:
            return CloseAnswer(project=request.project, run_id=request.run_id, state=state,
                               message=f"run is already {state}: nothing to close")
        first = self.ledger.request_close(request.project, request.run_id, list(request.skip), reason)
        self.queue.request(request.project, request.run_id, reason)
        message = "the shards in so far will be merged and forwarded" if first else "a close was already under way"
        return CloseAnswer(project=request.project, run_id=request.run_id, state="closing", message=message)

    def finalize(self, project: str, run_id: str, part: int | None = None) -> str:
        """Merge and forward a run, once; answers the run's state afterwards (or "not_claimed").

        Skipped shards are carried from the baseline run when it has them. Over CodSpeed's
        benchmark limit, or the bytes one merge may take, the run goes as several uploads (run
        parts): the first finalizer (``part`` None) plans them, forwards the first and queues one
        message per other part, so parts merge in parallel, each in an invocation of its own.
        Each part that reached the upstream is recorded, so a retry sends only the rest; whoever
        records the last one finishes the run."""
        now, lease = int(self.clock()), self.settings.finalize_lease_seconds
        if part is None:
            claimed = self.ledger.claim_finalize(project, run_id, now, lease)
        else:
            claimed = self.ledger.claim_part(project, run_id, part, now, lease)
        if not claimed:
            return "not_claimed"
        if part is None:
            self.publish(project, run_id)  # the report says "finalizing" while it is
        try:
            return self._finalize_claimed(project, run_id) if part is None else self._finalize_part(project, run_id, part)
        except Exception as exc:  # whatever it was, the attempt ends with its reason, and SQS retries it
            message = str(exc) if isinstance(exc, UpstreamError) else f"finalizing failed: {type(exc).__name__}: {exc}"
            self.ledger.finish(project, run_id, FORWARD_FAILED, error=message,
                               upstream={"run_id": None, "status": "failed", "at": iso(self.clock()), "message": message})
            if part is not None:
                self.ledger.release_part(project, run_id, part)
            self._metric("ForwardFailed")
            self.publish(project, run_id)
            raise

    def _finalize_claimed(self, project: str, run_id: str) -> str:
        snapshot = self.ledger.snapshot(project, run_id, with_names=True)
        if not snapshot.arrived():
            self.ledger.finish(project, run_id, CLOSED_EMPTY)
            self.store.mark_final(run_bundles_prefix(project, run_id))
            self.publish(project, run_id)
            return CLOSED_EMPTY
        if snapshot.run.plan is not None:  # a retry: the parts already sent were planned with this baseline
            plan = self._plan(snapshot, snapshot.run.plan["baseline"])
        else:
            branch = branch_of(snapshot.run.base_ref) or self.settings.default_branch
            plan = self._plan(snapshot, self.ledger.latest_baseline(project, branch))
            self.ledger.record_plan(project, run_id, {"baseline": plan.baseline_run, "parts": len(plan.uploads)})
        todo = [i for i in range(len(plan.uploads)) if str(i) not in snapshot.run.forwarded_parts]
        for index in todo[1:]:
            self.queue.request(project, run_id, "part", part=index)
        if todo:
            self._forward_part(plan, project, run_id, todo[0], snapshot.run.announced_parts.get(str(todo[0])))
        return self._finish_when_forwarded(plan, project, run_id)

    def _finalize_part(self, project: str, run_id: str, index: int) -> str:
        snapshot = self.ledger.snapshot(project, run_id, with_names=True)
        plan = self._plan(snapshot, snapshot.run.plan["baseline"])
        if str(index) not in snapshot.run.forwarded_parts:
            self._forward_part(plan, project, run_id, index, snapshot.run.announced_parts.get(str(index)))
        return self._finish_when_forwarded(plan, project, run_id)

    def _plan(self, snapshot: Snapshot, baseline_run: str | None) -> "ForwardPlan":
        """What a run forwards, the same for every finalizer of it: its arrived shards, the
        ones carried from the baseline run chosen when it was claimed, in uploads."""
        run = snapshot.run
        arrived = {s.name: s for s in sorted(snapshot.arrived().values(), key=lambda s: s.name)}
        branch = branch_of(run.base_ref) or self.settings.default_branch
        baseline = self.ledger.snapshot(run.project, baseline_run, with_names=True) if baseline_run else None
        completion = complete(run, arrived, branch, baseline)
        shards = dict(sorted({**arrived, **completion.carried}.items()))
        return ForwardPlan(
            run=run, shards=shards, completion=completion, baseline_run=baseline_run,
            base_metadata=self._metadata(run.project, run.run_id, next(iter(arrived.values()))),
            uploads=plan_forward(shards, self.settings.max_benchmarks_per_upload, self.settings.max_part_bytes),
        )

    def _forward_part(self, plan: "ForwardPlan", project: str, run_id: str, index: int, announced: dict | None) -> None:
        upload, parts = plan.uploads[index], len(plan.uploads)
        carried = {n: plan.completion.outcome["carried"][n] for n in upload.shards if n in plan.completion.carried}
        try:
            answer = self._forward([plan.shards[n] for n in upload.shards], upload.merged, project, run_id,
                                   plan.base_metadata, carried, index, parts, announced)
        except UpstreamError as exc:
            if parts > 1:
                raise UpstreamError(f"upload {index + 1} of {parts}: {exc}") from exc
            raise
        self.ledger.record_forwarded_part(project, run_id, index, answer)

    def _finish_when_forwarded(self, plan: "ForwardPlan", project: str, run_id: str) -> str:
        now = self.ledger.snapshot(project, run_id).run
        answers = now.forwarded_parts
        if len(answers) < len(plan.uploads):
            return now.state  # the finalizer of the last part to reach the upstream finishes the run
        parts = [answers[str(i)] for i in range(len(plan.uploads))]
        size = sum(p["size"] for p in parts)
        message = f"{len(plan.shards)} shards merged, {size} bytes" + (f", in {len(parts)} uploads" if len(parts) > 1 else "")
        finished = self.clock()
        if not self.ledger.finish(project, run_id, FORWARDED, outcome=plan.completion.outcome, upstream={
            "run_id": ",".join(p["run_id"] for p in parts), "status": "success", "at": iso(finished), "message": message,
        }):
            return FORWARDED  # the finalizer of another part finished it first
        self._metric("ForwardSucceeded")
        self._metric("MergedBytes", size, "Bytes")
        opened = datetime.fromisoformat(plan.run.created_at.replace("Z", "+00:00")).timestamp()
        self._metric("FinalizeLatency", finished - opened, "Seconds")
        if own_branch := branch_of(plan.run.ref):
            self.ledger.record_baseline(project, own_branch, run_id, plan.run.commit, finished)
            self._latest[(project, own_branch)] = (run_id, finished)  # this process knows it at once
        self.store.mark_final(run_bundles_prefix(project, run_id))
        self.publish(project, run_id)
        return FORWARDED

    def _metadata(self, project: str, run_id: str, shard: ShardRecord) -> dict | None:
        """The CodSpeed metadata a shard was uploaded with (None for a shard carried from another run)."""
        return self.ledger.upload_metadata(project, run_id, shard.upload_id) if shard.upload_id else None

    def _forward(self, shards: list[ShardRecord], merged: bool, project: str, run_id: str, base_metadata: dict,
                 carried: dict, index: int, parts: int, announced: dict | None) -> dict:
        """Send one upload: the shards merged, or one shard's archive as it was sent. A POST
        already answered for the same bytes (the merge is deterministic) is not made again: the
        archive goes to the URL it gave."""
        names = [s.name for s in shards]
        if merged:
            # Spooled to S3 (a multipart upload), not to /tmp: a part's size is bounded by S3, and the
            # MD5 the upstream wants before the PUT is taken while the merge writes.
            key = spool_key(project, run_id, index)
            sink, result = self._merge_part(key, shards)
            archive = self.store.reader(sink.key, sink.version_id)
            size, md5, gzipped = result.size, result.md5, True
            describe = partial(merged_metadata, run_id, base_metadata, names, md5, index + 1, parts, carried)
        else:
            [shard] = shards
            archive = self.store.reader(shard.key, shard.version_id)
            size, md5 = archive.digest()
            gzipped = shard.gzipped
            sent = self._metadata(project, run_id, shard) or base_metadata
            describe = partial(as_sent_metadata, sent, md5, gzipped)
        announce = partial(self._announce, project, run_id, index, describe, md5)
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
                    result = splice([NormalizedShard(
                        s.name, tuple(s.pids), self._index(s),
                        partial(self.store.open, s.normalized["key"], s.normalized["version"])) for s in shards],
                        sink, level=self.settings.merge_level)
                self._metric("PartsSpliced")
                return sink, result
            except (IndexMismatch, MissingObject) as exc:  # MissingObject: a carried shard's copy expired
                log.warning("normalized copies of %s not spliced, merged instead: %s", key, exc)
                self._metric("SpliceFallbacks")
        with self.store.spool(key) as sink:
            bundles = [ShardBundle(s.name, tuple(s.pids), partial(self.store.open, s.key, s.version_id)) for s in shards]
            result = merge_bundles(bundles, sink, level=self.settings.merge_level)
        return sink, result

    def _index(self, shard: ShardRecord) -> dict:
        index = self.store.read_json(index_key(shard.key), shard.normalized.get("index_version"))
        made_from = index.get("bundle") or {}
        if made_from.get("key") != shard.key or made_from.get("version") != shard.version_id:
            raise IndexMismatch(f"the index of {shard.key} was made from another object ({made_from})")
        return index

    def _announce(self, project: str, run_id: str, index: int, describe, md5: str) -> dict:
        """POST an upload's metadata and record the answer before the PUT (a retry re-PUTs there)."""
        accepted = self.upstream.announce(describe())
        announced = {"run_id": accepted.runId, "upload_url": accepted.uploadUrl, "md5": md5}
        self.ledger.record_announced_part(project, run_id, index, announced)
        return announced

    def sweep(self) -> list[tuple[str, str]]:
        """Close every open run past its deadline (absent shards become missing), and finalize
        again every run whose finalizer's lease ran out (it died: a timeout, a lost host)."""
        now = int(self.clock())
        due = self.ledger.open_runs_past(now)
        for project, run_id in due:
            self.ledger.request_close(project, run_id, [], "deadline")
            self.queue.request(project, run_id, "deadline")
        for project, run_id in self.ledger.stalled_finalizing(now):
            self.queue.request(project, run_id, "lease-expired")
        return due

    # -- reports ---------------------------------------------------------------------

    @contextmanager
    def reports_held(self):
        """Within it (a batch of arrivals), each run's report is published once, at the end, from
        a read after the batch's last change to it: under load a run's report is rebuilt once
        per batch instead of once per arrival."""
        self._held.runs = held = set()
        try:
            yield
        finally:
            self._held.runs = None
        for project, run_id in sorted(held):
            self._publish_now(project, run_id)

    def publish(self, project: str, run_id: str) -> None:
        held = getattr(self._held, "runs", None)
        if held is not None:
            held.add((project, run_id))
        else:
            self._publish_now(project, run_id)

    def _publish_now(self, project: str, run_id: str) -> None:
        try:
            snapshot = self.ledger.snapshot(project, run_id, with_names=True)  # the report lists results
        except SnapshotContended as exc:
            # Every read saw the run change under it: whoever changed it publishes after its change.
            log.warning("report of %s %s not rebuilt: %s", project, run_id, exc)
            self._metric("ReportsDeferred")
            return
        report = self._build_report(snapshot)
        if self.store.publish_report(project, run_id, report.version, report.model_dump_json(), render_markdown(report)):
            self._notify(report)

    def _build_report(self, snapshot: Snapshot) -> Report:
        return build_report(snapshot, iso(self.clock()), baseline=self._baseline_report(snapshot.run),
                            threshold=self.settings.regression_threshold,
                            page_url=self.page_url(snapshot.run.project, snapshot.run.run_id))

    def _baseline_report(self, run: RunRecord) -> Report | None:
        """The report of the run this one compares with: the one its finalizer chose, or while it
        is open the latest forwarded on its base branch. Read from the bucket (it holds the
        baseline's results), and kept: a forwarded run's results do not change."""
        chosen = (run.outcome or {}).get("baseline") or {}
        baseline_id = chosen.get("run_id")
        if baseline_id is None and run.state == OPEN:
            baseline_id = self._latest_baseline(run.project, branch_of(run.base_ref) or self.settings.default_branch)
        if baseline_id is None or baseline_id == run.run_id:
            return None
        key = (run.project, baseline_id)
        if key not in self._baselines:
            published = self.store.read_report(*key)
            if published is None:
                return None
            self._baselines[key] = Report.model_validate_json(published)
        return self._baselines[key]

    def _latest_baseline(self, project: str, branch: str) -> str | None:
        """The branch's latest forwarded run, looked up at most once a minute per process: an open
        run's report compares with it, and is rebuilt after every batch of arrivals."""
        now, key = self.clock(), (project, branch)
        if key not in self._latest or self._latest[key][1] < now - BASELINE_LOOKUP_SECONDS:
            self._latest[key] = (self.ledger.latest_baseline(project, branch), now)
        return self._latest[key][0]

    def page_url(self, project: str, run_id: str = "", base: str | None = None) -> str | None:
        """A signed link to a run's page (or, with no run, to the project's list of runs)."""
        base = base or self.settings.public_url
        if self.page_key is None or base is None:
            return None
        expires = int(self.clock()) + self.settings.page_link_days * 86400
        path = f"/runs/{project}" + (f"/{quote(run_id, safe='~:+')}" if run_id else "")
        return f"{base}{path}?{signed_query(self.page_key, project, run_id, expires)}"

    def _notify(self, report: Report) -> None:
        status = commit_status(report) if self.statuses and report.commit else None
        if status is None:
            return
        try:
            self.statuses.post(report.project, report.commit, *status, target_url=report.page_url)
        except Exception as exc:  # a status is a courtesy: it never fails an arrival or a forward
            log.warning("commit status for %s %s not posted: %s", report.project, report.run_id, exc)

    def refresh(self, project: str, run_id: str) -> Report:
        """Re-render and republish a run's report (a signed webhook asks for it)."""
        if not self.ledger.touch(project, run_id):
            raise NotFound(f"no run {run_id} for project {project}")
        self.publish(project, run_id)
        return self.report(project, run_id)

    def close_finished_ci_run(self, project: str, run_id: str) -> list[str]:
        """CI says the workflow run finished: close its run, if it has one still open."""
        snapshot = self.ledger.snapshot(project, run_id)
        if snapshot is None or snapshot.run.state != OPEN:
            return []
        self.close(CloseRequest(project=project, run_id=run_id), reason="ci-finished")
        return [run_id]

    def report(self, project: str, run_id: str) -> Report:
        published = self.store.read_report(project, run_id)
        if published is not None:
            return Report.model_validate_json(published)
        snapshot = self.ledger.snapshot(project, run_id, with_names=True)
        if snapshot is None:
            raise NotFound(f"no run {run_id} for project {project}")
        return self._build_report(snapshot)

    def recent_runs(self, project: str, limit: int = 50) -> list[RunRecord]:
        """A project's latest runs, newest first."""
        return self.ledger.recent_runs(project, limit)
