"""The ledger's items: TTL on every one, baselines in forward order, parts beside the run item. Against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

import json



from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, push, put, upload_request


def test_every_record_of_a_run_carries_the_ttl_attribute(isolated, project, run_id):
    import time

    from codspeed_aggregator.adapters.ledger.codec import load

    agg = isolated.aggregator
    agg.arrivals.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.arrivals.record(push(agg, project, run_id, "2", b"not gzip", total=2)["key"])
    items = [load(i) for i in agg.ledger.db.query(
        TableName=agg.ledger.table, KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{project}#{run_id}"}})["Items"]]
    assert {i["sk"].split("#")[0] for i in items} == {"RUN", "SHARD", "UPLOAD", "~META"}
    horizon = time.time() + agg.settings.retention_days * 86400
    assert all(horizon - 120 < i["expires_at"] <= horizon + 1 for i in items)


def test_the_latest_baseline_is_the_last_forwarded_even_within_one_second(isolated, project):
    baselines = isolated.aggregator.ledger.baselines
    for run_id, at in (("run-c", 999.5), ("run-b", 1000.25), ("run-a", 1000.75)):  # ids sort the other way
        baselines.record_baseline(project, "main", run_id, "a" * 40, at)
    assert baselines.latest_baseline(project, "main") == "run-a"
    assert baselines.latest_baseline(project, "other") is None


def test_each_forwarded_part_is_an_item_of_its_own_and_the_run_item_stays_small(isolated, project, run_id):
    from tests import runner

    agg = isolated.aggregator
    shards = 25
    for index in range(1, shards + 1):
        archive = runner.folder_archive(runner.walltime_folder(4000 + index, f"t{index}"), gzipped=False)
        request = upload_request(project, run_id, str(index), archive, total=shards, runner={
            "name": "codspeed-runner", "version": "5.0.2", "instruments": [], "executor": "walltime"})
        grant = agg.uploads.grant(ShardUploadRequest.model_validate(request))
        put(grant.model_dump(), archive)
        assert agg.arrivals.record(grant.key) == "recorded"
    assert isolated.finalize_all(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == shards  # walltime: one upload each, as sent
    raw = agg.ledger.db.get_item(TableName=agg.ledger.table, Key=agg.ledger.runs.key(project, run_id, "RUN"))["Item"]
    assert "forwarded_parts" not in raw and "announced_parts" not in raw and len(json.dumps(raw)) < 4096
    snapshot = agg.ledger.reads.snapshot(project, run_id)
    assert sorted(snapshot.run.forwarded_parts, key=int) == [str(i) for i in range(shards)] and snapshot.consistent()
