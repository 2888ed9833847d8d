"""A report rebuilt after a batch of arrivals reads the run's record and tallies, then only the
shards changed since the process's last read of the run (or since what the last report's publisher
read, in a process new to it); and the same snapshot as a whole read whenever the tallies' notes
cannot name every change. Against moto's server."""

import json
from unittest import mock

import pytest

from codspeed_aggregator.adapters.ledger import Reads
from codspeed_aggregator.adapters.ledger.codec import CHANGE_NOTES, tally_sk
from tests.factories import bundle, push
from tests.requests_seen import dynamodb_requests, item_keys, whole_run_reads


def _same(a, b) -> None:
    assert a.run.rev == b.run.rev and a.run.arrived_count == b.run.arrived_count
    assert {n: (s.state, s.rev, s.upload_id) for n, s in a.shards.items()} == {
        n: (s.state, s.rev, s.upload_id) for n, s in b.shards.items()
    }


def _fresh(agg) -> Reads:
    """Another process's reads: nothing known of any run."""
    return Reads(agg.ledger.table, agg.ledger.db)


@pytest.mark.slow
def test_a_rebuild_after_a_batch_reads_only_the_shards_it_changed(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4000 + i), total=20)["key"] for i in range(1, 13)]
    for key in keys[:8]:
        assert agg.record_arrival.record(key) == "recorded"  # each publishes: the process knows the run
    with dynamodb_requests(agg.ledger.db) as seen:
        with agg.reports.held():
            for key in keys[8:11]:
                assert agg.record_arrival.record(key) == "recorded"
    last_write = max(i for i, (op, _) in enumerate(seen) if op == "TransactWriteItems")
    publish = seen[last_write + 1 :]  # the last arrival's check for completeness, then the batch's report
    # and the baseline's lookup: main has no forwarded run yet, and an absence is never kept
    assert [op for op, _ in publish] == ["Query", "Query", "BatchGetItem", "BatchGetItem", "Query"]
    assert publish[1][1]["KeyConditionExpression"].endswith("sk BETWEEN :run AND :end")  # the run and its tallies
    assert len(item_keys(publish[2:3], "~NOTE#")) == 3  # the notes of the 3 changes since
    assert item_keys(publish[3:]) == ["SHARD#10", "SHARD#11", "SHARD#9"]
    with dynamodb_requests(agg.ledger.db) as seen:
        snapshot = agg.ledger.reads.changed_snapshot(project, run_id)
    assert [op for op, _ in seen] == ["Query"]  # nothing changed since the batch's report
    with dynamodb_requests(agg.ledger.db) as seen:
        assert agg.ledger.shards.record_rejection(project, run_id, "13", "u-13", "not gzip")
        snapshot = agg.ledger.reads.changed_snapshot(project, run_id)
    assert item_keys(seen) == ["SHARD#13"]
    _same(snapshot, _fresh(agg).snapshot(project, run_id))
    assert snapshot.run.arrived_count == 11 and snapshot.shards["13"].state == "rejected"
    assert sorted(snapshot.shards, key=int) == [str(i) for i in range(1, 12)] + ["13"]


@pytest.mark.parametrize(
    "how", ["too many changes for the notes", "two writers read one revision", "a change whose note is gone"]
)
@pytest.mark.slow
def test_changes_the_notes_cannot_name_are_read_whole(isolated, project, run_id, how):
    agg = isolated.aggregator
    shards = agg.ledger.shards
    one_tally = [str(i) for i in range(1, 2000) if tally_sk(str(i)) == tally_sk("1")][: CHANGE_NOTES + 2]
    assert agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=100)["key"]) == "recorded"
    reads = _fresh(agg)
    reads.snapshot(project, run_id)
    rev = shards.tally_rev(project, run_id, "1")
    if how == "too many changes for the notes":
        for shard in one_tally[1:]:
            assert shards.record_rejection(project, run_id, shard, f"u-{shard}", "refused")
    elif how == "two writers read one revision":  # both read the tally before either wrote
        with mock.patch.object(shards, "tally_rev", return_value=rev):
            for shard in one_tally[1:3]:
                assert shards.record_rejection(project, run_id, shard, f"u-{shard}", "refused")
    else:  # its transaction has the shard and its tally, and its note went (TTL deletes notes too)
        write = shards.transact
        with mock.patch.object(shards, "transact", side_effect=lambda items: write(items[:2])):
            assert shards.record_rejection(project, run_id, one_tally[1], "u-x", "refused")
    with dynamodb_requests(agg.ledger.db) as seen:
        snapshot = reads.changed_snapshot(project, run_id)
    assert whole_run_reads(seen) == 1
    _same(snapshot, _fresh(agg).snapshot(project, run_id))
    with dynamodb_requests(agg.ledger.db) as seen:
        again = reads.changed_snapshot(project, run_id)
    assert whole_run_reads(seen) == 0 and item_keys(seen) == []
    _same(again, snapshot)


def test_a_process_that_never_read_the_run_reads_it_whole(isolated, project, run_id):
    agg = isolated.aggregator
    assert agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"]) == "recorded"
    reads = _fresh(agg)
    with dynamodb_requests(agg.ledger.db) as seen:
        snapshot = reads.changed_snapshot(project, run_id)
    assert whole_run_reads(seen) == 1 and snapshot.run.arrived_count == 1
    assert reads.changed_snapshot(project, "no-such-run") is None


def test_the_finalizer_reads_the_shards_changed_since_under_its_own_role(stack, isolated, project, run_id):
    """A bundle refused while the run closes: the finalizer's report reads that shard alone, with a
    call its role in template.yaml allows (the local stack holds it to the role)."""
    agg = isolated.aggregator
    for shard in ("1", "2"):
        assert (
            agg.record_arrival.record(push(agg, project, run_id, shard, bundle(4100 + int(shard)), total=2)["key"])
            == "recorded"
        )
    assert agg.ledger.shards.record_rejection(project, run_id, "3", "u-3", "not gzip")  # no report after it
    refused = set(stack.enforcer.refusals())
    with dynamodb_requests(agg.ledger.db) as seen:
        assert isolated.finalize_all(project, run_id) == "forwarded"
    claim = next(i for i, (op, _) in enumerate(seen) if op == "TransactWriteItems")
    assert item_keys(seen[claim : claim + 4]) == ["SHARD#3"]  # the claim, then its report: the run, its note, shard 3
    assert set(stack.enforcer.refusals()) == refused
    assert any(call[:2] == ("FinalizerFunction", "dynamodb:BatchGetItem") for call in stack.enforcer.seen)
    assert agg.reports.report(project, run_id).shards[2].state == "rejected"


def _adopted(agg, project, run_id, known: bytes) -> Reads:
    reads = _fresh(agg)
    reads.adopt(project, run_id, known)
    return reads


@pytest.mark.slow
def test_a_process_new_to_the_run_reads_what_changed_since_what_another_read(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4200 + i), total=30)["key"] for i in range(1, 24)]
    for key in keys[:20]:
        assert agg.record_arrival.record(key) == "recorded"
    known = agg.ledger.reads.known(project, run_id)
    for key in keys[20:]:
        assert agg.record_arrival.record(key) == "recorded"
    assert agg.ledger.shards.record_rejection(project, run_id, "3", "u-3", "not gzip")  # a counted shard's later upload
    reads = _adopted(agg, project, run_id, known)
    with dynamodb_requests(agg.ledger.db) as seen:
        snapshot = reads.changed_snapshot(project, run_id)
    assert whole_run_reads(seen) == 0 and item_keys(seen) == ["SHARD#21", "SHARD#22", "SHARD#23", "SHARD#3"]
    _same(snapshot, _fresh(agg).snapshot(project, run_id))
    assert snapshot.run.arrived_count == 23 and snapshot.shards["3"].noted_upload == "u-3"
    assert _fresh(agg).known(project, run_id) is None  # a process that read nothing has nothing to hand on


@pytest.mark.parametrize(
    "how", ["another run under the same id", "shards that do not add up", "not JSON", "a later release's field"]
)
@pytest.mark.slow
def test_what_another_process_read_is_used_only_when_it_is_of_this_run_and_adds_up(isolated, project, run_id, how):
    agg = isolated.aggregator
    for i in range(1, 4):
        assert (
            agg.record_arrival.record(push(agg, project, run_id, str(i), bundle(4300 + i), total=5)["key"])
            == "recorded"
        )
    known = json.loads(agg.ledger.reads.known(project, run_id))
    if how == "another run under the same id":  # the first expired, and its id was used again
        known["created_at"] = "2020-01-01T00:00:00Z"
    elif how == "shards that do not add up":
        known["shards"][0]["rev"] += 1
    elif how == "a later release's field":
        known["shards"][0]["colour"] = "blue"
    data = b"{not json" if how == "not JSON" else json.dumps(known).encode()
    reads = _adopted(agg, project, run_id, data)
    with dynamodb_requests(agg.ledger.db) as seen:
        snapshot = reads.changed_snapshot(project, run_id)
    assert whole_run_reads(seen) == (how != "a later release's field")
    _same(snapshot, _fresh(agg).snapshot(project, run_id))
    assert snapshot.run.arrived_count == 3


def test_a_process_keeps_its_own_read_over_what_another_read(isolated, project, run_id):
    agg = isolated.aggregator
    for i in range(1, 3):
        assert (
            agg.record_arrival.record(push(agg, project, run_id, str(i), bundle(4400 + i), total=5)["key"])
            == "recorded"
        )
    older = agg.ledger.reads.known(project, run_id)
    assert agg.record_arrival.record(push(agg, project, run_id, "3", bundle(4403), total=5)["key"]) == "recorded"
    mine = agg.ledger.reads.known(project, run_id)
    agg.ledger.reads.adopt(project, run_id, older)
    assert agg.ledger.reads.known(project, run_id) == mine != older


@pytest.mark.parametrize("which", ["ledger", "digest"])
@pytest.mark.slow
def test_an_unreadable_ledger_or_digest_object_is_read_around_and_the_arrival_counts(isolated, project, run_id, which):
    """Not gzip (a truncated write, a hand edit): a process new to the run reads it whole instead. It
    was a BadGzipFile out of the arrival, which went to the dead-letter queue while the run waited."""
    from dataclasses import replace

    from codspeed_aggregator.adapters.ledger import Ledger
    from codspeed_aggregator.adapters.results_store import ResultsStore
    from codspeed_aggregator.domain.keys import digest_key, known_key

    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4500 + i), total=20)["key"] for i in range(1, 21)]
    for key in keys[:19]:
        assert agg.record_arrival.record(key) == "recorded"
    s3 = agg.results.s3
    corrupt = (known_key if which == "ledger" else digest_key)(project, run_id)
    s3.put_object(Bucket=agg.settings.bucket_name, Key=corrupt, Body=b"\x1f\x8b not a gzip stream")
    fresh = replace(
        agg, ledger=Ledger.on(agg.ledger.table, agg.ledger.db), results=ResultsStore(agg.settings.bucket_name, s3)
    )
    assert fresh.record_arrival.record(keys[19]) == "recorded"
    report = fresh.reports.report(project, run_id)
    assert report.arrived == 20 and report.state in ("finalizing", "open")
