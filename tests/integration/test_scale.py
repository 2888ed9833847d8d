"""What keeps a large run cheap on DynamoDB: small snapshot reads, one report per run per
batch of arrivals, and never a report built from a read that saw two instants."""

from unittest import mock

import pytest

from codspeed_aggregator.adapters.ledger import SnapshotContended
from codspeed_aggregator.adapters.ledger.codec import dump
from codspeed_aggregator.domain.records import Snapshot
from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, put, upload_request


def _push(agg, project, run_id, shard, data, **kwargs) -> str:
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs))
    )
    put(grant.model_dump(), data)
    return grant.key


def _item_bytes(item: dict) -> int:
    return sum(len(k) + len(str(v)) for k, v in item.items())


def test_a_snapshot_reads_small_items_and_the_benchmarks_are_in_the_bucket(isolated, project, run_id):
    agg = isolated.aggregator
    names = [f"tests/test_{'x' * 150}.py::test_{i}" for i in range(400)]
    agg.record_arrival.record(_push(agg, project, run_id, "1", bundle(benchmarks=names), total=2))
    ledger = agg.ledger
    page = ledger.db.query(
        TableName=ledger.table,
        ConsistentRead=True,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues=dump({":pk": f"RUN#{project}#{run_id}"}),
    )
    read = {i["sk"]["S"]: _item_bytes(i) for i in page["Items"]}
    assert {sk.split("#")[0] for sk in read} == {"RUN", "SHARD", "UPLOAD", "~META", "~NOTE"}  # no names in the table
    assert max(read.values()) < 4096, read  # 400 names of 170 characters live in the bucket (about 68 KB)
    shard = ledger.reads.snapshot(project, run_id).shards["1"]
    assert shard.results_kept and agg.results.read(shard.key).names == names


@pytest.mark.parametrize("sizes", [(5000, 3), (20000, 1)])
@pytest.mark.slow
def test_every_benchmark_of_a_large_shard_is_reachable_from_the_report(isolated, project, run_id, sizes):
    """A DynamoDB item holds about 2000 results: a shard's 5000 or 20000 are counted in the
    report's summary and listed, every one, on the shard's page."""
    agg = isolated.aggregator
    large, small = sizes
    shards = {
        "1": [f"tests/test_big.py::test_{i}" for i in range(large)],
        "2": [f"tests/test_small.py::t{i}" for i in range(small)],
    }
    for shard, names in shards.items():
        agg.record_arrival.record(
            _push(agg, project, run_id, shard, bundle(pid=4000 + int(shard), benchmarks=names, filler_lines=1), total=2)
        )
    report = agg.reports.report(project, run_id)
    assert report.counts.measured == large + small == sum(s.benchmarks for s in report.shards)
    assert len(report.model_dump_json()) < 20_000  # a summary, whatever the shards hold
    for shard, names in shards.items():
        page = agg.reports.shard_benchmarks(project, run_id, shard)
        assert (
            {b.name for b in page.benchmarks} == set(names)
            and len(page.benchmarks) == len(names)
            and all(b.state == "measured" and b.value for b in page.benchmarks)
        )


def test_a_run_changing_under_every_read_gets_no_report_built_from_it(isolated, project, run_id):
    agg = isolated.aggregator
    key = _push(agg, project, run_id, "1", bundle(), total=2)
    before = agg.store.read_report(project, run_id)
    with (
        mock.patch.object(Snapshot, "consistent", return_value=False),
        mock.patch.object(agg.ledger.reads, "sleep", lambda s: None),
    ):
        with pytest.raises(SnapshotContended, match=f"run {run_id} of {project} changed under each of 20 reads"):
            agg.ledger.reads.snapshot(project, run_id)
        assert agg.record_arrival.record(key) == "recorded"  # counted; its report waits for a read of one instant
    assert agg.store.read_report(project, run_id) == before
    assert agg.ledger.reads.snapshot(project, run_id).run.arrived_count == 1
    agg.reports.publish(project, run_id)
    assert [s.name for s in agg.reports.report(project, run_id).shards if s.state == "arrived"] == ["1"]


def test_a_batch_of_arrivals_publishes_each_runs_report_once_after_its_last_change(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [_push(agg, project, run_id, str(i), bundle(pid=100 + i), total=4) for i in range(1, 4)]
    other = _push(agg, project, f"{run_id}-b", "1", bundle(), total=2)
    with mock.patch.object(agg.store, "publish_report", wraps=agg.store.publish_report) as published:
        with agg.reports.held():
            assert [agg.record_arrival.record(k) for k in [*keys, other]] == ["recorded"] * 4
            assert published.call_count == 0
        assert sorted(c.args[1] for c in published.call_args_list) == [run_id, f"{run_id}-b"]
    assert sorted(s.name for s in agg.reports.report(project, run_id).shards if s.state == "arrived") == ["1", "2", "3"]
    with mock.patch.object(agg.store, "publish_report", wraps=agg.store.publish_report) as published:
        # outside a batch: published at once (a retry's repair)
        assert agg.record_arrival.record(keys[0]) == "duplicate"
        assert published.call_count == 1


def test_the_spool_writes_parts_of_its_size_and_a_failed_merge_leaves_nothing(isolated):
    import os

    from codspeed_aggregator.adapters.bucket import SpoolWriter

    store = isolated.aggregator.store
    data = os.urandom(12 << 20)
    writer = SpoolWriter(store.s3, store.bucket, "spool/acme/x/run/part-0000.tar.gz", part_bytes=5 << 20)
    for start in range(0, len(data), 1 << 20):
        writer.write(data[start : start + (1 << 20)])
        assert len(writer._buffer) < 5 << 20  # never more than one part held
    writer.complete()
    assert [p["PartNumber"] for p in writer._parts] == [1, 2, 3]
    reader = store.reader(writer.key, writer.version_id)
    assert reader.read() == data
    reader.seek(0)
    assert reader.read(10) == data[:10]  # a retried PUT reads it again from the start
    reader.close()

    with mock.patch.object(store.s3, "create_multipart_upload", wraps=store.s3.create_multipart_upload) as started:
        with store.spool("spool/acme/x/run/part-0002.tar.gz") as small:
            small.write(b"under one part")
    assert started.call_count == 0  # one PUT
    assert store.reader(small.key, small.version_id).read() == b"under one part"

    with pytest.raises(RuntimeError, match="merge died"):
        with store.spool("spool/acme/x/run/part-0001.tar.gz") as sink:
            sink.write(b"half an archive")
            raise RuntimeError("merge died")
    listed = store.s3.list_objects_v2(Bucket=store.bucket, Prefix="spool/acme/x/run/part-0001")
    assert listed.get("KeyCount") == 0
    pending = store.s3.list_multipart_uploads(Bucket=store.bucket, Prefix="spool/acme/x/run/").get("Uploads", [])
    assert pending == []


def test_a_failed_finalize_comes_back_in_minutes_not_after_the_queues_90(stack):
    import json

    from codspeed_aggregator import wiring
    from codspeed_aggregator.domain.retries import redelivery_delay
    from codspeed_aggregator.handlers import finalizer
    from codspeed_local.lambda_context import LocalContext

    assert [redelivery_delay(n) for n in (1, 2, 3, 4, 5, 9)] == [60, 120, 240, 480, 900, 900]
    agg = wiring.for_finalizer()
    record = {
        "messageId": "m-1",
        "receiptHandle": "handle-1",
        "body": json.dumps({"project": "a/b", "run_id": "r", "reason": "close"}),
        "attributes": {"ApproximateReceiveCount": "3"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:finalize",
        "awsRegion": "us-east-1",
    }
    from codspeed_aggregator.handlers.sqs_batch import AllRecordsFailed

    with (
        mock.patch.object(agg.finalize_run, "finalize", side_effect=RuntimeError("upstream down")),
        mock.patch.object(agg.queue, "retry_in") as retry_in,
    ):
        with pytest.raises(AllRecordsFailed, match="All records failed"):  # SQS keeps the message
            finalizer.handler({"Records": [record]}, LocalContext("codspeed-finalizer"))
    retry_in.assert_called_once_with("handle-1", 240)


def test_the_largest_manifest_skip_list_and_ancestry_fit_the_run_item_with_room_to_spare(isolated, project, run_id):
    import json

    from codspeed_rules.names import MAX_ANCESTORS
    from codspeed_wire.api import MAX_SHARDS, CloseRequest

    agg = isolated.aggregator
    names = [f"{i:04d}" + "x" * 124 for i in range(MAX_SHARDS)]  # the longest names, as many as a run may expect
    ancestors = [f"{i:040x}" for i in range(MAX_ANCESTORS)]  # and as many base commits as a run may name
    _push(agg, project, run_id, names[0], bundle(), expect=names, base_commit="f" * 40, base_ancestors=ancestors)
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=names[1:]))
    raw = agg.ledger.db.get_item(TableName=agg.ledger.table, Key=agg.ledger.runs.key(project, run_id, "RUN"))["Item"]
    size = len(json.dumps(raw))  # over-counts DynamoDB's own measure (type tags, quotes)
    assert size < 300 * 1024, size  # DynamoDB's limit is 400 KB
    run = agg.ledger.reads.snapshot(project, run_id).run
    assert len(run.skipped) == MAX_SHARDS - 1 and len(run.base_commits()) == 1 + MAX_ANCESTORS


@pytest.mark.slow
def test_a_retried_first_finalizer_keeps_the_baseline_its_plan_chose(isolated, project, run_id):
    from dataclasses import replace

    from codspeed_aggregator.adapters.upstream_http import UpstreamError

    agg = replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, max_benchmarks_per_upload=3))
    for i in (1, 2):
        agg.record_arrival.record(
            _push(agg, project, run_id, str(i), bundle(40 + i, [f"t{i}::{j}" for j in range(3)]), total=2)
        )
    isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "finalizing"  # planned with no baseline; its 2 parts queued
    parts = [m["part"] for m in isolated.finalize_requests() if m["run_id"] == run_id]
    with mock.patch.object(agg.upstream, "announce", side_effect=UpstreamError("POST answered 503: injected")):
        for part in parts:
            with pytest.raises(UpstreamError):
                agg.finalize_run.finalize(project, run_id, part)  # nothing sent
    for i in (1, 2):  # meanwhile another run of the branch is forwarded: a baseline now exists
        agg.record_arrival.record(_push(agg, project, f"{run_id}-other", str(i), bundle(50 + i), total=2))
    assert isolated.finalize_all(project, f"{run_id}-other", agg) == "forwarded"
    assert [agg.finalize_run.finalize(project, run_id, part) for part in parts][
        -1
    ] == "forwarded"  # SQS redelivers each
    assert agg.ledger.reads.snapshot(project, run_id).run.forward.plan.baseline is None
    assert agg.reports.report(project, run_id).baseline is None


def test_a_report_rebuilt_after_an_arrival_reads_the_new_shards_results_only(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [_push(agg, project, run_id, str(i), bundle(pid=4000 + i), total=8) for i in range(1, 7)]
    for key in keys[:5]:
        agg.record_arrival.record(key)
    with mock.patch.object(agg.results, "read", wraps=agg.results.read) as read:
        agg.record_arrival.record(keys[5])
    assert [c.args[0] for c in read.call_args_list] == [keys[5]]  # the five before are summed up already
    assert agg.reports.report(project, run_id).counts.measured == 6 * 3
