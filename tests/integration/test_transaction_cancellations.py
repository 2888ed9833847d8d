"""Real DynamoDB cancels a transaction with ``TransactionConflict`` whenever two writers touch one
item at once (a busy run: two arrivals on one of its tallies, an arrival and the claim that closes
them), and with ``ThrottlingError`` under load; moto never does. These reasons are injected into
the botocore client with an event hook, on every transaction the ledger writes: only
``ConditionalCheckFailed`` on the shard's tally means the run is closed; any other cancellation
is retried, and never turns a shard late."""

import json
from contextlib import contextmanager
from dataclasses import replace

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from codspeed_aggregator.adapters.ledger import Ledger, TransactionContended
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from tests.factories import bundle, past_the_barrier, put, upload_request

DOCUMENTED = ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"]


@contextmanager
def cancelled(client, reasons: list[list[str]]):
    """The next TransactWriteItems calls are cancelled, one per entry, with these per-item reasons
    (DynamoDB's shape of the error); later calls go through."""
    left = list(reasons)
    seen = []

    def hook(params, **kwargs):
        seen.append(params)
        if not left:
            return None
        codes = left.pop(0)
        parsed = {
            "Error": {
                "Code": "TransactionCanceledException",
                "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{', '.join(codes)}]",
            },
            "CancellationReasons": [
                {"Code": c, **({"Message": "Transaction is ongoing for the item"} if c != "None" else {})}
                for c in codes
            ],
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }
        return AWSResponse("https://dynamodb.local", 400, {}, None), parsed

    client.meta.events.register("before-call.dynamodb.TransactWriteItems", hook)
    try:
        yield seen
    finally:
        client.meta.events.unregister("before-call.dynamodb.TransactWriteItems", hook)


@pytest.fixture
def agg(isolated):
    """The isolated aggregator on a DynamoDB client of its own (the hook stays on it) that never sleeps."""
    client = boto3.session.Session().client("dynamodb")
    ledger = Ledger.on(isolated.aggregator.ledger.table, client, sleep=lambda s: None)
    return replace(isolated.aggregator, ledger=ledger)


def _grant(agg, project, run_id, shard, total=2, sent: bool = True) -> str:
    """An upload granted and, ``sent``, its bundle PUT: its key."""
    data = bundle(4000 + int(shard))
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, total=total))
    )
    if sent:
        put(grant.model_dump(), data)
    return grant.key


def _put_now(agg, key: str, shard: str) -> None:
    """The PUT of an upload granted earlier, answered now."""
    agg.store.s3.put_object(Bucket=agg.store.bucket, Key=key, Body=bundle(4000 + int(shard)))


@pytest.mark.parametrize("reason", DOCUMENTED)
@pytest.mark.parametrize("position", [0, 1])  # on the shard item, or on its tally
@pytest.mark.slow
def test_an_arrival_cancelled_for_a_conflict_or_a_throttle_is_retried_and_counted(
    agg, project, run_id, reason, position
):
    key = _grant(agg, project, run_id, "1")
    codes = ["None", "None"]
    codes[position] = reason
    with cancelled(agg.ledger.db, [codes, codes]) as calls:
        assert agg.record_arrival.record(key) == "recorded"
    assert len(calls) == 3  # two cancelled, the third written
    snapshot = agg.ledger.reads.snapshot(project, run_id)
    assert snapshot.shards["1"].state == "arrived" and snapshot.run.arrived_count == 1 and snapshot.run.state == "open"


def test_only_a_failed_condition_on_the_tally_means_the_run_is_closed(agg, project, run_id):
    agg.record_arrival.record(_grant(agg, project, run_id, "1"))
    straggler = _grant(agg, project, run_id, "2", sent=False)
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert past_the_barrier(agg).finalize_run.finalize(project, run_id) == "forwarded"  # nothing came in time
    _put_now(agg, straggler, "2")  # a PUT begun before its URL expired, answered after the forward
    with cancelled(agg.ledger.db, [["None", "TransactionConflict"]]) as calls:
        assert agg.record_arrival.record(straggler) == "late"  # then the tally's real condition: the claim closed it
    assert len(calls) >= 3  # the conflict retried, the closed run's refusal, the count in the next attempt, the note
    assert agg.reports.report(project, f"{run_id}~2").arrived == 2


@pytest.mark.parametrize("reason", DOCUMENTED)
@pytest.mark.slow
def test_a_claim_cancelled_on_a_tally_is_retried_and_no_shard_is_counted_after_it(agg, project, run_id, reason):
    agg.record_arrival.record(_grant(agg, project, run_id, "1"))
    straggler = _grant(agg, project, run_id, "2")
    on_a_tally = ["None", reason] + ["None"] * 15  # the run item, then the 16 tallies the claim closes
    with cancelled(agg.ledger.db, [on_a_tally]) as calls:
        assert agg.ledger.runs.claim_finalize(project, run_id, 1_000, 900, grants=2)
    assert len(calls) == 2 and len(json.loads(calls[0]["body"])["TransactItems"]) == 17
    assert agg.record_arrival.record(straggler) == "late"  # granted before the claim, in after it: the next attempt's
    assert agg.ledger.reads.snapshot(project, run_id).run.arrived_count == 1
    assert agg.reports.report(project, f"{run_id}~2").arrived == 2


def test_a_transaction_cancelled_every_time_fails_the_message_back_and_changes_nothing(agg, project, run_id):
    key = _grant(agg, project, run_id, "1")
    before = agg.ledger.reads.snapshot(project, run_id)
    with cancelled(agg.ledger.db, [["TransactionConflict", "None"]] * 50):
        with pytest.raises(TransactionContended, match="cancelled 8 times for other reasons than its conditions"):
            agg.record_arrival.record(key)
    after = agg.ledger.reads.snapshot(project, run_id)
    assert after.shards == before.shards and after.run.arrived_count == 0 and after.run.rev == before.run.rev
    assert agg.record_arrival.record(key) == "recorded"  # SQS delivers it again: counted once


@pytest.mark.parametrize("reason", DOCUMENTED)
def test_a_rejection_cancelled_for_a_conflict_is_retried_and_recorded(agg, project, run_id, reason):
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, "1", b"not a tar", total=2))
    )
    put(grant.model_dump(), b"not a tar")
    with cancelled(agg.ledger.db, [[reason, "None"]]):
        assert agg.record_arrival.record(grant.key) == "rejected"
    assert agg.ledger.reads.snapshot(project, run_id).shards["1"].state == "rejected"
