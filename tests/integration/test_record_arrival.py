"""Counting arrivals: once, replaced on a retry, rejected with a reason, late into the next attempt.
Against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import CloseRequest
from tests.factories import bundle, grant, marked_uncut, packed, past_the_barrier, push, put


def test_an_arrival_is_counted_once_and_completion_asks_for_finalizing(isolated, project, run_id):
    agg = isolated.aggregator
    isolated.finalize_requests()
    first = push(agg, project, run_id, "1", bundle(4242), total=2)
    assert agg.record_arrival.record(first["key"]) == "recorded"
    assert agg.record_arrival.record(first["key"]) == "duplicate"
    report = agg.reports.report(project, run_id)
    assert (report.arrived, report.partial, report.state) == (1, True, "open")
    assert not [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    second = push(agg, project, run_id, "2", bundle(4242), total=2)
    assert agg.record_arrival.record(second["key"]) == "recorded"
    assert agg.record_arrival.record(second["key"]) == "duplicate"
    # The arrival that completed the run asks for finalizing; so does its duplicate (its first
    # delivery may have died before asking). The finalizer claims the run once either way.
    assert [m for m in isolated.finalize_requests() if m["run_id"] == run_id] == [
        {"project": project, "run_id": run_id, "reason": "complete"}
    ] * 2
    assert agg.reports.report(project, run_id).version > report.version


def test_a_retried_shard_replaces_its_bundle_and_counts_once(isolated, project, run_id):
    agg = isolated.aggregator
    old = push(agg, project, run_id, "1", bundle(1, ["old::bench"]), total=2)
    new = push(agg, project, run_id, "1", bundle(1, ["new::a", "new::b"]), total=2)
    assert agg.record_arrival.record(old["key"]) == "recorded"
    assert agg.record_arrival.record(new["key"]) == "recorded"
    assert agg.record_arrival.record(old["key"]) == "duplicate"  # an old event late: the newer bundle stays
    shard = agg.reports.report(project, run_id).shards[0]
    assert (shard.state, shard.attempt, shard.benchmarks, agg.reports.report(project, run_id).arrived) == (
        "arrived",
        2,
        2,
        1,
    )


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"not gzip", "neither gzip-compressed nor a tar archive"),
        (__import__("gzip").compress(b"not a tar" * 100), "gzip but not a tar archive"),
        (
            __import__("tests.factories", fromlist=["tar_gz"]).tar_gz({"../../etc/cron.d/x": b"x"}),
            "points outside the profile folder",
        ),
        (packed(bundle())[:-700], "truncated or corrupt"),  # marked as normalized: verified, and refused alike
        (marked_uncut(__import__("gzip").compress(b"not a tar" * 100)), "gzip but not a tar archive"),
    ],
)
def test_a_bad_bundle_is_rejected_with_its_reason_and_the_run_goes_on(isolated, project, run_id, data, reason):
    agg = isolated.aggregator
    good = push(agg, project, run_id, "1", bundle(), total=2)
    agg.record_arrival.record(good["key"])
    bad = push(agg, project, run_id, "2", data, total=2)
    assert agg.record_arrival.record(bad["key"]) == "rejected"
    report = agg.reports.report(project, run_id)
    shards = {s.name: s for s in report.shards}
    assert shards["2"].state == "rejected" and reason in shards["2"].reason
    assert shards["1"].state == "arrived" and report.arrived == 1 and report.state == "open"
    fixed = push(agg, project, run_id, "2", bundle(77), total=2)  # the shard pushed again, fixed
    assert agg.record_arrival.record(fixed["key"]) == "recorded"
    assert {s.name: (s.state, s.reason) for s in agg.reports.report(project, run_id).shards}["2"] == ("arrived", None)


@pytest.mark.slow
def test_many_shards_with_duplicate_events_in_threads_count_exactly_once(isolated, project, run_id):
    agg = isolated.aggregator
    isolated.finalize_requests()
    shards = 12
    keys = [push(agg, project, run_id, str(i), bundle(1000 + i % 3), total=shards)["key"] for i in range(1, shards + 1)]
    events = keys * 3
    __import__("random").Random(7).shuffle(events)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(agg.record_arrival.record, events))
    assert outcomes.count("recorded") == shards and outcomes.count("duplicate") == 2 * shards
    report = agg.reports.report(project, run_id)
    assert report.arrived == shards and report.version >= shards
    assert agg.ledger.reads.snapshot(project, run_id).run.arrived_count == shards
    assert len([m for m in isolated.finalize_requests() if m["run_id"] == run_id]) >= 1


def test_a_bundle_whose_event_comes_after_the_close_stopped_waiting_counts_in_the_next_attempt(
    isolated, project, run_id
):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["a::one"]), total=2)["key"])
    data = bundle(4242, ["b::two"])
    straggler = grant(agg, project, run_id, "2", data, total=2)  # granted before the close (from outside any CI)
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "waiting"  # the close waits for it: its URL is good
    assert past_the_barrier(agg).finalize_run.finalize(project, run_id) == "forwarded"  # nothing came in time
    put(straggler, data)  # its PUT, begun before its URL expired, answered after the run was finalized
    isolated.finalize_requests()
    for _ in range(2):  # its event, delivered twice
        assert agg.record_arrival.record(straggler["key"]) in ("late", "duplicate")
    shard = {s.name: s for s in agg.reports.report(project, f"{run_id}~1").shards}["2"]
    assert (
        shard.state == "late"
        and shard.reason == f"arrived after the run was finalized: counted in attempt 2 ({run_id}~2)"
    )
    second = agg.reports.report(project, f"{run_id}~2")
    assert second.attempt == 2 and second.arrived == 2 and [s.state for s in second.shards] == ["arrived", "arrived"]
    asked = [
        m["run_id"] for m in isolated.finalize_requests() if m["reason"] != "barrier"
    ]  # the close's re-reads aside
    assert asked == [f"{run_id}~2"]  # complete: asked once
    assert agg.finalize_run.finalize(project, f"{run_id}~2") == "forwarded"
    [parts] = [p for (_, run), p in isolated.upstream.combined().items() if run == run_id]
    held = {part: benchmarks_in(archive_of(upload)) for part, upload in parts.items()}
    assert held == {
        pushed_part_id("1", "valgrind"): {"a::one"},
        pushed_part_id("2", "valgrind"): {"b::two"},
    }  # never a yes and a drop, and shard 1 not sent twice
