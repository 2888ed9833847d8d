"""The ledger's items: TTL on every one, baselines in forward order, parts beside the run item. Against
moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

import json

import pytest

from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, push, put, upload_request


def test_every_record_of_a_run_carries_the_ttl_attribute(isolated, project, run_id):
    import time

    from codspeed_aggregator.adapters.ledger.codec import load

    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.record_arrival.record(push(agg, project, run_id, "2", b"not gzip", total=2)["key"])
    items = [
        load(i)
        for i in agg.ledger.db.query(
            TableName=agg.ledger.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"RUN#{project}#{run_id}"}},
        )["Items"]
    ]
    assert {i["sk"].split("#")[0] for i in items} == {"RUN", "SHARD", "UPLOAD", "~META", "~NOTE"}
    horizon = time.time() + agg.settings.retention_days * 86400
    assert all(horizon - 120 < i["expires_at"] <= horizon + 1 for i in items)


def test_the_latest_baseline_is_the_last_forwarded_even_within_one_second(isolated, project):
    baselines = isolated.aggregator.ledger.baselines
    for run_id, at in (("run-c", 999.5), ("run-b", 1000.25), ("run-a", 1000.75)):  # ids sort the other way
        baselines.record_baseline(project, "main", run_id, "a" * 40, at)
    assert baselines.latest_baseline(project, "main") == "run-a"
    assert baselines.latest_baseline(project, "other") is None


@pytest.mark.slow
def test_each_forwarded_part_is_an_item_of_its_own_and_the_run_item_stays_small(isolated, project, run_id):
    from tests import runner

    agg = isolated.aggregator
    shards = 25
    for index in range(1, shards + 1):
        archive = runner.folder_archive(runner.walltime_folder(4000 + index, f"t{index}"), gzipped=False)
        request = upload_request(
            project,
            run_id,
            str(index),
            archive,
            total=shards,
            runner={"name": "codspeed-runner", "version": "5.0.2", "instruments": [], "executor": "walltime"},
        )
        grant = agg.request_upload.grant(ShardUploadRequest.model_validate(request))
        put(grant.model_dump(), archive)
        assert agg.record_arrival.record(grant.key) == "recorded"
    assert isolated.finalize_all(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == shards  # walltime: one upload each, as sent
    raw = agg.ledger.db.get_item(TableName=agg.ledger.table, Key=agg.ledger.runs.key(project, run_id, "RUN"))["Item"]
    assert "forwarded_parts" not in raw and "announced_parts" not in raw and len(json.dumps(raw)) < 4096
    snapshot = agg.ledger.reads.snapshot(project, run_id)
    assert sorted(snapshot.run.forwarded_parts, key=int) == [str(i) for i in range(shards)] and snapshot.consistent()


@pytest.mark.slow
def test_arrivals_write_their_shard_and_its_tally_never_the_run_item(isolated, project, run_id):
    """Concurrent arrivals meet on one of the run's 16 tallies, not all on the run item; the run's
    counts and revision are its item's plus its tallies', and the last arrival still completes it."""
    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4000 + i), total=8)["key"] for i in range(1, 9)]
    written = []

    def note(params, event_name, **_):
        operation = event_name.rsplit(".", 1)[1]
        if operation == "TransactWriteItems":
            written.extend(
                (op.get("Key") or op["Item"])["sk"]["S"] for i in params["TransactItems"] for op in i.values()
            )
        elif operation in ("PutItem", "UpdateItem", "DeleteItem"):
            written.append((params.get("Key") or params.get("Item"))["sk"]["S"])

    db = agg.record_arrival.shards.db
    db.meta.events.register("before-parameter-build.dynamodb", note, unique_id="writes")
    try:
        outcomes = [agg.record_arrival.record(key) for key in keys[:-1]]
    finally:
        db.meta.events.unregister("before-parameter-build.dynamodb", unique_id="writes")
    assert outcomes == ["recorded"] * 7
    assert written and "RUN" not in written
    assert {sk.split("#", 1)[0] for sk in written} == {"SHARD", "RUN", "~NOTE"}  # the shard, RUN#TALLY#NN, its note
    assert len({sk for sk in written if sk.startswith("RUN#TALLY#")}) > 1
    snapshot = agg.ledger.reads.snapshot(project, run_id)
    assert (
        snapshot.consistent() and snapshot.run.arrived_count == 7 and snapshot.run.rev == snapshot.run.run_changes + 7
    )
    own = lambda: [m for m in isolated.finalize_requests() if m["run_id"] == run_id]  # noqa: E731 -- not another test's
    assert own() == []
    assert agg.record_arrival.record(keys[-1]) == "recorded"
    assert [m["reason"] for m in own()] == ["complete"]


def test_a_next_attempt_counts_its_inherited_shards_on_its_item_and_its_own_on_its_tallies():
    from codspeed_aggregator.adapters.ledger.run_item import run_from

    item = {
        "sk": "RUN",
        "project": "acme/widgets",
        "run_id": "7001",
        "state": "open",
        "rev": 5,
        "run_changes": 3,
        "group@": {"total": 4, "names": None, "indexed": False},
        "arrived@": 2,
    }  # 2 shards inherited from the run's earlier attempt
    tallies = [{"sk": "RUN#TALLY#03", "rev": 1, "arrived@": 1}, {"sk": "RUN#TALLY#09", "rev": 2, "arrived@": 0}]
    run = run_from(item, tallies)
    assert (run.rev, run.run_changes, run.group_counts, run.arrived_count) == (8, 3, {"": 3}, 3)
    assert not run.complete()
    assert run_from(item, [*tallies, {"sk": "RUN#TALLY#11", "rev": 1, "arrived@": 1}]).complete()


def test_a_transaction_cancelled_by_a_condition_changes_none_of_its_items(isolated, run_id):
    """The local stack keeps the items a transaction names instead of a copy of each table (moto
    copied the whole table): a cancelled transaction still rolls back every item it wrote before
    the failed condition."""
    import pytest
    from botocore.exceptions import ClientError
    from moto.dynamodb.models import DynamoDBBackend

    assert DynamoDBBackend.transact_write_items.item_by_item  # the stack this runs on serves the patched moto
    db, table = isolated.aggregator.ledger.db, isolated.aggregator.ledger.table
    key = {"pk": {"S": f"TEST#{run_id}"}}
    db.put_item(TableName=table, Item={**key, "sk": {"S": "a"}, "n": {"N": "1"}})
    with pytest.raises(ClientError) as cancelled:
        db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": {**key, "sk": {"S": "a"}},
                        "UpdateExpression": "SET n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
                {"Put": {"TableName": table, "Item": {**key, "sk": {"S": "b"}}}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": {**key, "sk": {"S": "c"}},
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    items = db.query(TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": key["pk"]})[
        "Items"
    ]
    assert items == [{**key, "sk": {"S": "a"}, "n": {"N": "1"}}]


def test_a_jobs_token_follows_its_upload_into_the_attempt_that_counts_it(isolated, project, run_id):
    """A runner's POST, then a close, then its PUT: the bundle counts in the run's next attempt, and the
    part went upstream with the stack's token, the job's being left under the first attempt."""
    import time

    from codspeed_aggregator.domain.records import SentPost

    shards = isolated.aggregator.ledger.shards
    sent = SentPost(b'{"version":10}', "codspeed-runner", token="job-oidc-token", token_expires=int(time.time()) + 600)
    shards.keep_metadata(project, run_id, "u1", {}, sent)
    shards.copy_upload_metadata(project, run_id, f"{run_id}~2", "u1")
    copied = shards.upload_post(project, f"{run_id}~2", "u1", time.time())[1]
    assert copied.body == sent.body and copied.token == "job-oidc-token"
    expired = SentPost(b"{}", token="old", token_expires=int(time.time()) + 30)  # within the send's margin
    shards.keep_metadata(project, run_id, "u2", {}, expired)
    shards.copy_upload_metadata(project, run_id, f"{run_id}~2", "u2")
    assert shards.upload_post(project, f"{run_id}~2", "u2", time.time())[1].token is None  # not near its expiry


class _Reading(dict):
    """A run item that remembers which of its attributes were read."""

    def __init__(self, item: dict) -> None:
        super().__init__(item)
        self.read: set[str] = set()

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)


def test_every_attribute_a_run_item_holds_after_its_whole_life_is_one_its_record_reads(isolated, project, run_id):
    """The case seen: ``close_reason`` was written at every close and read by nothing."""
    from codspeed_aggregator.adapters.ledger.codec import COUNT_PREFIX, GROUP_PREFIX, load
    from codspeed_aggregator.adapters.ledger.run_item import run_from
    from codspeed_wire.api import CloseRequest

    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), expect=["1", "2"])["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["2"], ci_run="4242", ci_attempt=1))
    assert isolated.finalize_all(project, run_id) == "forwarded"
    raw = agg.ledger.db.get_item(TableName=agg.ledger.table, Key=agg.ledger.runs.key(project, run_id, "RUN"))["Item"]
    item = _Reading(load(raw))
    run = run_from(item, [])
    assert run.close.requested and run.skipped == ("2",) and run.close.by is not None and run.outcome.note
    for_the_table = {"pk", "sk", "expires_at", "open_pk", "group_count", "variant_count"}  # keys, TTL, index, caps
    by_prefix = {name for name in item if name.startswith((GROUP_PREFIX, COUNT_PREFIX))}  # a group's manifest, count
    assert run.groups and by_prefix
    assert sorted(set(item) - item.read - for_the_table - by_prefix) == []


def test_a_field_added_to_the_run_record_in_one_place_round_trips_through_its_item(isolated, project, run_id):
    """The run record's item is one mapping read both ways (``run_item``): a field added to the record,
    and nowhere else, is written with the run's item and read back from DynamoDB."""
    from dataclasses import field, make_dataclass
    from unittest import mock

    from codspeed_aggregator.adapters.ledger import run_item as mapping
    from codspeed_aggregator.domain.records import RunRecord

    grown = make_dataclass("Grown", [("reviewer", str | None, field(default=None))], bases=(RunRecord,))
    runs = isolated.aggregator.ledger.runs
    with mock.patch.object(mapping, "RunRecord", grown):
        run, created = runs.open_run(grown(project=project, run_id=run_id, groups={}, reviewer="octocat"))
        read = runs.run_record(project, run_id)
    assert created and isinstance(read, grown) and read.reviewer == "octocat"
    assert runs.run_record(project, run_id).run_id == run_id  # the record as it is reads the item too


def test_every_field_of_the_run_record_it_stores_round_trips_through_dynamodb(isolated, project, run_id):
    """Each field the run item keeps, set to a value that is not its default, is read back as it was:
    those stored under the names earlier releases wrote (``attempt``, the close's), the close's fields
    (a record of their own, each an attribute) and those kept in a form of their own."""
    from dataclasses import fields

    from codspeed_aggregator.adapters.ledger.codec import dump, load
    from codspeed_aggregator.adapters.ledger.run_item import ELSEWHERE, PARTS, run_from, run_item
    from codspeed_aggregator.domain.attempts import RunAttempt
    from codspeed_aggregator.domain.closing import Awaiting, CiOrigin, RunClose
    from codspeed_aggregator.domain.forwarding import RunForward
    from codspeed_aggregator.domain.identity import RunIdentity
    from codspeed_aggregator.domain.manifest import Manifest
    from codspeed_aggregator.domain.outcome import Outcome
    from codspeed_aggregator.domain.plan_record import PlanRecord
    from codspeed_aggregator.domain.records import RunRecord
    from codspeed_wire.report import UpstreamEntry

    values = {
        "state": "forwarded", "commit": "a" * 40, "head_commit": "b" * 40, "ref": "refs/pull/7/merge",
        "base_ref": "main", "base_commit": "c" * 40, "base_ancestors": ("d" * 40,),
        "identity": RunIdentity("a" * 40, "acme", "widgets", "refs/pull/7/merge"),
        "created_at": "2026-12-07T09:00:00Z", "deadline_at": 1799999999, "rev": 9, "run_changes": 4,
        "skipped": ("2",), "outcome": Outcome(note="carried 1"),
        "attempt": RunAttempt(2, 2, True), "variants": ("|valgrind",),
        "close": RunClose(True, CiOrigin("4242", 1, True), Awaiting("bench 1/2", 1799998000.0, 2, 1799999100.0)),
        "forward": RunForward(
            sends_parts=True, by_executor=True, lease_until=1799999000,
            plan=PlanRecord(baseline="7000", parts=2, sends=1),
            upstream=UpstreamEntry(status="success", at="2026-12-07T09:01:00Z"), error="refused", owed=True,
        ),
        "given_up": {"3": "gone"}, "grants": 5, "tokenless": True, "fork": True, "provider": "GITHUB",
        "ci_url": "https://ci.example/run/7", "declared": True,
    }  # fmt: skip
    for part in PARTS:  # a field added to a part is set here too
        assert all(getattr(values[part], f.name) != f.default for f in fields(PARTS[part])), part
    stored = {f.name for f in fields(RunRecord)} - set(ELSEWHERE) - {"project", "run_id"}  # its key
    assert set(values) == stored, stored ^ set(values)  # a field added to the record is added here too
    run = RunRecord(project=project, run_id=run_id, groups={"": Manifest(total=2)}, **values)
    table = isolated.aggregator.ledger
    table.db.put_item(TableName=table.table, Item=dump(run_item(run, 1799999999)))
    raw = table.db.get_item(TableName=table.table, Key=table.runs.key(project, run_id, "RUN"))["Item"]
    read = run_from(load(raw), [])
    assert {name: getattr(read, name) for name in values} == values
    kept_as = {"run_attempt", "ci_attempt", "rerun", "close_requested", "closed_by", "awaiting", "forward_error"}
    kept_as |= {"sends_parts", "by_executor", "lease_until", "plan", "upstream", "owed"}
    assert kept_as <= set(raw)  # the names these fields had before they were parts: stored items read as before
