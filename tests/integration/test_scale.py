"""What keeps a large run cheap on DynamoDB: small snapshot reads, one report per run per
batch of arrivals, and never a report built from a read that saw two instants."""

from unittest import mock

import pytest

from codspeed_aggregator.adapters.ledger_table import UPLOAD_PREFIX, SnapshotContended, _dump
from codspeed_aggregator.domain.ledger import Snapshot
from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, put, upload_request


def _push(agg, project, run_id, shard, data, **kwargs) -> str:
    grant = agg.request_upload(ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs)))
    put(grant.model_dump(), data)
    return grant.key


def _item_bytes(item: dict) -> int:
    return sum(len(k) + len(str(v)) for k, v in item.items())


def test_a_snapshot_reads_small_items_and_the_benchmark_names_only_when_asked(isolated, project, run_id):
    agg = isolated.aggregator
    names = [f"tests/test_{'x' * 150}.py::test_{i}" for i in range(400)]
    agg.record_arrival(_push(agg, project, run_id, "1", bundle(benchmarks=names), total=2))
    ledger = agg.ledger
    page = ledger.db.query(TableName=ledger.table, ConsistentRead=True, KeyConditionExpression="pk = :pk AND sk < :u",
                           ExpressionAttributeValues=_dump({":pk": f"RUN#{project}#{run_id}", ":u": UPLOAD_PREFIX}))
    read = {i["sk"]["S"]: _item_bytes(i) for i in page["Items"]}
    assert set(read) == {"RUN", "SHARD#1"}
    assert read["SHARD#1"] < 1024, read  # 400 names of 170 characters live elsewhere (about 68 KB)
    assert ledger.snapshot(project, run_id).shards["1"].benchmark_names == []
    assert ledger.snapshot(project, run_id, with_names=True).shards["1"].benchmark_names == names


def test_a_run_changing_under_every_read_gets_no_report_built_from_it(isolated, project, run_id):
    agg = isolated.aggregator
    key = _push(agg, project, run_id, "1", bundle(), total=2)
    before = agg.store.read_report(project, run_id)
    with mock.patch.object(Snapshot, "consistent", return_value=False), \
            mock.patch.object(agg.ledger, "sleep", lambda s: None):
        with pytest.raises(SnapshotContended, match=f"run {run_id} of {project} changed under each of 20 reads"):
            agg.ledger.snapshot(project, run_id)
        assert agg.record_arrival(key) == "recorded"  # counted; its report waits for a read of one instant
    assert agg.store.read_report(project, run_id) == before
    assert agg.ledger.snapshot(project, run_id).run.arrived_count == 1
    agg.publish(project, run_id)
    assert [s.name for s in agg.report(project, run_id).shards if s.state == "arrived"] == ["1"]


def test_a_batch_of_arrivals_publishes_each_runs_report_once_after_its_last_change(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [_push(agg, project, run_id, str(i), bundle(pid=100 + i), total=4) for i in range(1, 4)]
    other = _push(agg, project, f"{run_id}-b", "1", bundle(), total=2)
    with mock.patch.object(agg.store, "publish_report", wraps=agg.store.publish_report) as published:
        with agg.reports_held():
            assert [agg.record_arrival(k) for k in [*keys, other]] == ["recorded"] * 4
            assert published.call_count == 0
        assert sorted(c.args[1] for c in published.call_args_list) == [run_id, f"{run_id}-b"]
    assert sorted(s.name for s in agg.report(project, run_id).shards if s.state == "arrived") == ["1", "2", "3"]
    with mock.patch.object(agg.store, "publish_report", wraps=agg.store.publish_report) as published:
        assert agg.record_arrival(keys[0]) == "duplicate"  # outside a batch: published at once (a retry's repair)
        assert published.call_count == 1
