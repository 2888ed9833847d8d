"""Random interleavings of push, duplicate events, bad bundles, retries, close, deadline,
finalize and late pushes, re-runs into the run's later attempts included; DESIGN's invariants
are checked after every step, the upstream's as CodSpeed would hold it (the stand-in combines
the run's parts: the last upload of each runPartId)."""

import os
import time
import uuid
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from codspeed_aggregator.domain.errors import Conflict, Unprocessable
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_aggregator.local.upstream_stub import archive_of, benchmarks_in
from tests.factories import bundle, footprint, put, upload_request

SHARDS = ("1", "2", "3")
FINAL = ("forwarded", "forward_failed", "closed_empty")


def machine_for(isolated):
    agg = isolated.aggregator

    class RunLifecycle(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.project = f"acme/sm-{uuid.uuid4().hex[:8]}"
            self.run_id = f"sm-{uuid.uuid4().hex[:10]}"
            self.pushed = []  # (shard, key, benchmark or None for a bad bundle), into the first attempt
            self.later = []  # (shard, key): pushed after the first attempt ended, into a later one
            self.current = {}  # shard -> the benchmark of its bundle counted last (the model)
            self.seen_version, self.seen_arrived = 0, 0

        def _state(self):
            snapshot = agg.ledger.reads.snapshot(self.project, self.run_id)
            return snapshot.run.state if snapshot else None

        @rule(shard=st.sampled_from(SHARDS), good=st.booleans())
        def push(self, shard, good):
            benchmark = f"s{shard}::upload{len(self.pushed)}"
            data = bundle(4242, [benchmark]) if good else b"definitely not a tar.gz"
            request = ShardUploadRequest.model_validate(upload_request(self.project, self.run_id, shard, data, total=len(SHARDS)))
            snapshot = agg.ledger.reads.snapshot(self.project, self.run_id)
            if snapshot is not None and snapshot.run.state == "open" and snapshot.run.closing:
                before = footprint(isolated, self.project, self.run_id)
                with pytest.raises(Conflict, match="is closing: it takes no more shards"):
                    agg.uploads.grant(request)
                assert footprint(isolated, self.project, self.run_id) == before  # a refusal changes nothing
                return
            if snapshot is not None and snapshot.run.state != "open":
                try:  # a later attempt: its counts are not modelled, what reaches the upstream is
                    grant = agg.uploads.grant(request)
                except Conflict as exc:
                    assert f"of {self.project} is closing" in str(exc) or "times: it takes no more" in str(exc)
                    return
                assert grant.run_id.startswith(f"{self.run_id}~")
                put(grant.model_dump(), data)
                if good:
                    self.later.append((shard, grant.key))
                return
            grant = agg.uploads.grant(request)
            put(grant.model_dump(), data)
            self.pushed.append((shard, grant.key, benchmark if good else None))

        @precondition(lambda self: self.pushed)
        @rule(shard=st.sampled_from(SHARDS), other_manifest=st.booleans())
        def refused_push(self, shard, other_manifest):
            """A push the run must refuse, in whatever state it is (open, closing, forwarded: then
            before any next attempt is opened): another manifest, or a shard outside the run's. Every
            item and object version of the run is as it was."""
            total, name = (len(SHARDS) + 1, shard) if other_manifest else (len(SHARDS), "9")
            data = bundle(4242, [f"s{shard}::refused"])
            request = ShardUploadRequest.model_validate(upload_request(self.project, self.run_id, name, data, total=total))
            before = footprint(isolated, self.project, self.run_id)
            with pytest.raises((Conflict, Unprocessable), match="manifest|is closing|takes no more"):
                agg.uploads.grant(request)
            assert footprint(isolated, self.project, self.run_id) == before

        @precondition(lambda self: self.pushed)
        @rule(pick=st.integers(min_value=0), times=st.integers(min_value=1, max_value=3))
        def deliver(self, pick, times):
            """An S3 event, delivered once or more (SQS duplicates), in any order."""
            shard, key, benchmark = self.pushed[pick % len(self.pushed)]
            before = agg.ledger.reads.snapshot(self.project, self.run_id)
            outcomes = [agg.arrivals.record(key) for _ in range(times)]
            first = outcomes[0]
            if benchmark is None:
                assert outcomes[0] in ("rejected", "duplicate") and outcomes[1:] == ["duplicate"] * (times - 1)
                after = agg.ledger.reads.snapshot(self.project, self.run_id)
                others = lambda snap: {n: (s.state, s.upload_id) for n, s in snap.shards.items() if n != shard}  # noqa: E731
                assert others(after) == others(before)  # a bad bundle changes nothing else
            else:
                assert outcomes[1:] == ["duplicate"] * (times - 1)
                assert first in ("recorded", "duplicate", "late")
                if first == "recorded":
                    assert before.run.state == "open"
                    self.current[shard] = benchmark

        @rule(skip=st.lists(st.sampled_from(SHARDS), unique=True, max_size=2))
        def close(self, skip):
            if self._state() is not None:
                agg.closing.close(CloseRequest(project=self.project, run_id=self.run_id, skip=skip))

        @rule()
        def deadline(self):
            replace(agg, clock=lambda: time.time() + agg.settings.run_deadline_seconds + 60).closing.sweep()

        @precondition(lambda self: self.later)
        @rule(pick=st.integers(min_value=0))
        def deliver_later(self, pick):
            shard, key = self.later[pick % len(self.later)]
            assert agg.arrivals.record(key) in ("recorded", "duplicate", "late")

        @rule()
        def finalize(self):
            for message in isolated.finalize_requests():
                if message["run_id"].split("~")[0] == self.run_id:
                    agg.finalizing.finalize(self.project, message["run_id"], message.get("part"))

        @invariant()
        def counted_once_and_never_backwards(self):
            snapshot = agg.ledger.reads.snapshot(self.project, self.run_id)
            if snapshot is None:
                return
            arrived = snapshot.arrived()
            assert set(arrived) == set(self.current)  # invariant 1: the distinct shards accepted
            assert snapshot.run.arrived_count == len(arrived)  # the run's own count is as exact
            assert {n: agg.results.read(s.key).names for n, s in arrived.items()} == {n: [b] for n, b in self.current.items()}
            report = agg.reports.report(self.project, self.run_id)
            assert report.version >= self.seen_version and report.arrived >= self.seen_arrived  # invariant 4
            self.seen_version, self.seen_arrived = report.version, report.arrived

        @invariant()
        def each_benchmark_once_upstream_with_everything_accepted(self):
            held = {part: benchmarks_in(archive_of(upload))
                    for parts in isolated.upstream.combined(self.project).values() for part, upload in parts.items()}
            assert not isolated.upstream.benchmarks_twice(self.project)  # invariant 2: whatever the attempts
            latest = agg.reports.report(self.project, self.run_id) if self._state() else None
            if latest is not None and latest.state == "forwarded":  # invariant 3: nothing accepted is lost
                forwarded = agg.ledger.reads.snapshot(self.project, latest.run_id)
                upstream = {b for found in held.values() for b in found}
                for shard in forwarded.arrived().values():
                    names = agg.results.read(shard.key).names
                    assert set(names) <= upstream, (shard.name, names, held)

    return RunLifecycle


def test_run_lifecycle_holds_the_invariants_under_random_interleavings(isolated):
    run_state_machine_as_test(
        machine_for(isolated),
        settings=settings(max_examples=int(os.environ.get("LIFECYCLE_EXAMPLES", 12)), stateful_step_count=14, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]),
    )
