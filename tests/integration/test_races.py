"""Close, arrivals, the sweeper and duplicate finalize messages racing: one finalization, one forward."""

import threading
import time
from dataclasses import replace

import pytest

from codspeed_wire.api import CloseRequest, ShardUploadRequest
from tests.factories import bundle, put, upload_request


def _grant(agg, project, run_id, shard, total=2):
    data = bundle(4242, [f"{shard}::b"])
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, total=total))
    )
    put(grant.model_dump(), data)
    return grant.key


def _race(*calls):
    start = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(i, call):
        start.wait()
        results[i] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _finalize_all(isolated, project, run_id) -> list[str]:
    requests = [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    return [isolated.aggregator.finalize_run.finalize(project, run_id) for _ in requests]


@pytest.mark.slow
def test_close_racing_the_last_arrival(isolated, project):
    agg = isolated.aggregator
    for attempt in range(4):
        run_id = f"race-close-arrival-{attempt}-{time.time_ns()}"
        agg.record_arrival.record(_grant(agg, project, run_id, "1"))
        last = _grant(agg, project, run_id, "2")
        outcome, _ = _race(
            lambda last=last: agg.record_arrival.record(last),
            lambda run_id=run_id: agg.close_run.close(CloseRequest(project=project, run_id=run_id)),
        )
        states = _finalize_all(isolated, project, run_id)
        assert states.count("forwarded") == 1 and len(isolated.upstream.uploads(run_id)) == 1
        shard = {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"]
        assert (outcome, shard) in (("recorded", "arrived"), ("late", "late"))


@pytest.mark.slow
def test_two_closes_and_the_sweeper_racing(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(_grant(agg, project, run_id, "1"))
    late_clock = replace(agg, clock=lambda: time.time() + agg.settings.run_deadline_seconds + 60)

    def close():
        return agg.close_run.close(CloseRequest(project=project, run_id=run_id))

    _race(close, close, late_clock.sweep_deadlines.sweep)
    states = _finalize_all(isolated, project, run_id)
    assert len(states) >= 2 and states.count("forwarded") == 1 and set(states) <= {"forwarded", "not_claimed"}
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_duplicate_finalize_messages_in_parallel_forward_once(isolated, project, run_id):
    agg = isolated.aggregator
    for shard in ("1", "2"):
        agg.record_arrival.record(_grant(agg, project, run_id, shard))
    results = _race(*[lambda: agg.finalize_run.finalize(project, run_id)] * 6)
    assert results.count("forwarded") == 1 and len(isolated.upstream.uploads(run_id)) == 1


def test_two_arrivals_publishing_at_once_leave_the_report_with_both(isolated, project):
    agg = isolated.aggregator
    for attempt in range(5):
        run_id = f"race-publish-{attempt}-{time.time_ns()}"
        keys = [_grant(agg, project, run_id, shard, total=3) for shard in ("1", "2")]
        before = agg.reports.report(project, run_id).version
        assert _race(*[lambda k=k: agg.record_arrival.record(k) for k in keys]) == ["recorded", "recorded"]
        report = agg.reports.report(project, run_id)
        assert report.arrived == 2 and report.version > before
        assert (
            report.version == agg.ledger.reads.snapshot(project, run_id).run.rev
        )  # the newest version is the one published


@pytest.mark.slow
def test_arrivals_in_parallel_leave_each_process_reading_the_run_as_it_is(isolated, project, run_id):
    """Sixteen arrivals at once, each publishing after its own (reading only what changed since the
    process's last read): the last report holds every shard, and what the process knows of the run
    is what a whole read finds."""
    from codspeed_aggregator.adapters.ledger import Reads

    agg = isolated.aggregator
    keys = [_grant(agg, project, run_id, str(i), total=17) for i in range(1, 17)]
    assert _race(*(lambda k=k: agg.record_arrival.record(k) for k in keys)) == ["recorded"] * 16
    agg.reports.publish(project, run_id)
    report = agg.reports.report(project, run_id)
    assert report.arrived == 16 and sorted(s.name for s in report.shards if s.state == "arrived") == sorted(
        str(i) for i in range(1, 17)
    )
    known, whole = (
        agg.ledger.reads.changed_snapshot(project, run_id),
        Reads(agg.ledger.table, agg.ledger.db).snapshot(project, run_id),
    )
    assert known.run.rev == whole.run.rev and {n: s.rev for n, s in known.shards.items()} == {
        n: s.rev for n, s in whole.shards.items()
    }
