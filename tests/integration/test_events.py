"""Every file in events/ drives its handler against the local stack, in the order a run lives."""

import json
import threading
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote_plus

import pytest

from codspeed_aggregator.domain.records import GrantRecord
from codspeed_local.lambda_context import LocalContext
from tests.factories import bundle, wait_for

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def _api(name: str) -> tuple[int, dict]:
    from codspeed_aggregator.handlers import api

    answer = api.handler(_event(name), LocalContext("codspeed-api"))
    return answer["statusCode"], json.loads(answer["body"])


def test_every_event_file_is_exercised():
    assert {p.name for p in EVENTS.glob("*.json")} - {"env.json"} == {
        "api-request-upload.json",
        "api-drop-in-upload.json",
        "api-close-run.json",
        "api-read-report.json",
        "arrivals-s3-object-created.json",
        "finalizer-finalize-run.json",
        "sweeper-scheduled.json",
        "api-webhook-refresh.json",
        "api-webhook-github-workflow-run.json",
    }


@pytest.mark.slow
def test_the_sample_events_walk_a_run_through_every_handler(stack):
    from codspeed_aggregator.handlers import arrivals, finalizer, sweeper

    refused_before = set(stack.enforcer.refusals())
    status, grant = _api("api-request-upload.json")
    assert status == 201 and grant["key"].startswith("bundles/acme%2Fwidgets/7044765741/2/")  # the project: one segment

    status, accepted = _api("api-drop-in-upload.json")
    assert status == 200 and accepted["status"] == "success" and accepted["runId"] == "7044765742"

    # GitHub says workflow run 7044765742 completed (signed with the local stack's webhook secret).
    status, closed = _api("api-webhook-github-workflow-run.json")
    assert status == 200 and closed == {"closed": ["7044765742"]}

    # A stored refresh is signed, but its timestamp is long past: it is refused as a replay.
    status, refused = _api("api-webhook-refresh.json")
    assert status == 401 and "replay" in refused["error"]

    # The arrival event names a bundle key: make that bundle and its upload record real.
    record = _event("arrivals-s3-object-created.json")
    key = unquote_plus(
        json.loads(record["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
    )  # as S3 encodes it
    upload_id = key.rsplit("/", 1)[1].removesuffix(".tar.gz")
    from tests.isolated import on_stack

    agg = on_stack()  # the test's own set-up: not recorded, this thread calls as no function
    agg.ledger.shards.add_upload(
        "acme/widgets", "7044765741", GrantRecord("2", upload_id, None, "0.5", metadata={"profileMd5": "x"})
    )
    agg.store.s3.put_object(Bucket=agg.store.bucket, Key=key, Body=bundle())
    answer = arrivals.handler(record, LocalContext("codspeed-arrivals"))
    assert answer == {"batchItemFailures": []}

    status, report = _api("api-read-report.json")
    assert status == 200 and report["arrived"] == 1 and report["partial"] is True
    assert {s["name"]: s["state"] for s in report["shards"]}["2"] == "arrived"

    status, closed = _api("api-close-run.json")
    assert status == 202 and closed["state"] == "closing"
    answer = finalizer.handler(_event("finalizer-finalize-run.json"), LocalContext("codspeed-finalizer"))
    assert answer == {"batchItemFailures": []}
    final = wait_for(lambda: (r := _api("api-read-report.json")[1])["state"] == "forwarded" and r)
    assert {s["name"]: s["state"] for s in final["shards"]} == {
        "1": "missing",
        "2": "arrived",
        "3": "missing",
        "4": "skipped",
    }

    # A refresh signed now, as `codspeed-aggregator refresh-event` prints one for sam local invoke: taken.
    import contextlib
    import io

    from codspeed_aggregator.cli import main
    from codspeed_aggregator.handlers import api
    from tests.conftest import WEBHOOK_SECRET

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert (
            main(
                [
                    "refresh-event",
                    "--project",
                    "acme/widgets",
                    "--run-id",
                    "7044765741",
                    "--webhook-secret",
                    WEBHOOK_SECRET,
                ]
            )
            == 0
        )
    answer = api.handler(json.loads(printed.getvalue()), LocalContext("codspeed-api"))
    assert answer["statusCode"] == 200 and json.loads(answer["body"])["version"] >= final["version"], answer

    assert "closed" in sweeper.handler(_event("sweeper-scheduled.json"), LocalContext("codspeed-sweeper"))

    # The sample finalize message found its run already claimed by the stack's own poller:
    # finalize one more run here, so that the finalizer's whole forward is recorded too.
    from codspeed_wire.api import ShardUploadRequest
    from tests.factories import put, upload_request

    for shard in ("1", "2"):  # two valgrind shards: merged, spooled to S3, sent from there
        data = bundle(pid=100 + int(shard))
        grant = agg.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request("acme/iam", "iam-1", shard, data, total=3))
        )
        put(grant.model_dump(), data)
        agg.record_arrival.record(grant.key, len(data))
    message = _event("finalizer-finalize-run.json")
    message["Records"][0]["body"] = json.dumps({"project": "acme/iam", "run_id": "iam-1", "reason": "close"})
    finalizer.handler(message, LocalContext("codspeed-finalizer"))
    assert agg.reports.report("acme/iam", "iam-1").state == "forwarded"

    # Every handler ran under its role in template.yaml (the stack holds each to it): nothing was refused.
    assert set(stack.enforcer.refusals()) == refused_before
    seen = {(role, action) for role, action, _, _ in stack.enforcer.seen}
    assert {
        ("FinalizerFunction", "s3:GetObjectVersion"),
        ("FinalizerFunction", "s3:PutObjectTagging"),
        ("SweeperFunction", "dynamodb:Query"),
        ("ArrivalsFunction", "dynamodb:BatchGetItem"),
    } <= seen


def test_env_json_gives_sam_local_invoke_every_setting_the_code_requires():
    import re

    source = (EVENTS.parent / "functions/codspeed_aggregator/settings.py").read_text()
    required = set(re.findall(r'env\.get\("([A-Z_]+)", ""\)', source)) - {"TOKENLESS_PROJECTS"}
    parameters = _event("env.json")["Parameters"]
    assert required <= set(parameters) and all(parameters[name] for name in required)


class _Context(LocalContext):
    """A context whose remaining time goes down as the batch goes: one value per call."""

    def __init__(self, *left_ms: int) -> None:
        super().__init__("codspeed-arrivals")
        self.left_ms = list(left_ms)

    def get_remaining_time_in_millis(self) -> int:
        return self.left_ms.pop(0) if len(self.left_ms) > 1 else self.left_ms[0]


class _Sent:
    """The requests one of a function's clients makes from this thread, by operation (its role
    still applies; the stack's pollers, on other threads, share the client)."""

    def __init__(self, function: str, service: str, *operations: str) -> None:
        from codspeed_aggregator.adapters.aws import client

        self.client, self.calls = client(service, function), []
        self.operations, self.thread = operations, threading.get_ident()

    def _seen(self, params, model, **_):
        if model.name in self.operations and threading.get_ident() == self.thread:
            self.calls.append((model.name, params))

    def __enter__(self):
        self.client.meta.events.register("before-parameter-build", self._seen, unique_id=f"sent-{id(self)}")
        return self

    def __exit__(self, *exc):
        self.client.meta.events.unregister("before-parameter-build", unique_id=f"sent-{id(self)}")


def test_an_arrivals_batch_out_of_time_sends_the_rest_again_as_new_messages_not_toward_the_dlq(stack):
    from codspeed_aggregator.handlers import arrivals

    event = _event("arrivals-s3-object-created.json")
    second = {
        **event["Records"][0],
        "messageId": "second-message",
        "attributes": {**event["Records"][0]["attributes"], "ApproximateReceiveCount": "5"},
    }
    event["Records"].append(second)
    body = json.loads(second["body"])
    body["Records"][0]["s3"]["object"]["key"] = "bundles/acme%252Fbudget/run-1/1/nobody-granted-this.tar.gz"
    for record in event["Records"]:
        record["body"] = json.dumps(body)
    with _Sent("arrivals", "sqs", "SendMessage") as sent:
        running_out = arrivals.handler(event, _Context(60_000, 5_000))  # the first fits, the second would not
    # The second is done here: it goes back as a new message, whose receive count starts again,
    # so a bundle deferred in batch after batch never reaches the dead-letter queue (5 receives).
    assert running_out == {"batchItemFailures": []}
    counted = {"deferrals": {"DataType": "Number", "StringValue": "1"}}  # its first deferral, counted
    assert sent.calls == [
        (
            "SendMessage",
            {
                "QueueUrl": stack.resources.arrivals_queue_url,
                "MessageBody": second["body"],
                "MessageAttributes": counted,
            },
        )
    ]
    with _Sent("arrivals", "sqs", "SendMessage") as sent:
        assert arrivals.handler(event, _Context(5_000)) == {"batchItemFailures": []}  # none fits: both sent again
    assert len(sent.calls) == 2
    assert not [r for r in stack.enforcer.refusals() if r[0] == "ArrivalsFunction"]


def test_an_event_deferred_past_its_limit_goes_to_the_dead_letter_queue_saying_why(stack):
    """A bundle deferred batch after batch went round for ever, unseen: each time a new message (its
    age, which the backlog alarm reads, new too), nothing counting or capping its deferrals."""
    from codspeed_aggregator.adapters.aws import client
    from codspeed_aggregator.handlers import arrivals
    from codspeed_aggregator.use_cases.record_arrival import MAX_DEFERRALS

    event = _event("arrivals-s3-object-created.json")
    event["Records"] = event["Records"][:1]
    record = event["Records"][0]
    for deferrals in (MAX_DEFERRALS - 1, MAX_DEFERRALS):
        record["messageAttributes"] = {
            "deferrals": {"stringValue": str(deferrals), "stringListValues": [], "binaryListValues": []}
            | {"dataType": "Number"}
        }
        with _Sent("arrivals", "sqs", "SendMessage") as sent:
            assert arrivals.handler(event, _Context(5_000)) == {"batchItemFailures": []}  # no time for it
        [(_, sent_as)] = sent.calls
        if deferrals < MAX_DEFERRALS:  # sent again, counted once more
            assert sent_as["QueueUrl"] == stack.resources.arrivals_queue_url
            assert sent_as["MessageAttributes"]["deferrals"]["StringValue"] == str(MAX_DEFERRALS)
    assert sent_as["QueueUrl"] == stack.resources.arrivals_dlq_url and sent_as["MessageBody"] == record["body"]
    why = sent_as["MessageAttributes"]["why"]["StringValue"]
    assert (
        why == f"deferred {MAX_DEFERRALS} times: no invocation of the arrivals function had the time its bundles need"
    )
    sqs = client("sqs")
    [dead] = sqs.receive_message(QueueUrl=stack.resources.arrivals_dlq_url, MessageAttributeNames=["All"])["Messages"]
    assert dead["Body"] == record["body"]  # there, where ArrivalsDeadLetterAlarm looks
    sqs.delete_message(QueueUrl=stack.resources.arrivals_dlq_url, ReceiptHandle=dead["ReceiptHandle"])
    assert not [r for r in stack.enforcer.refusals() if r[0] == "ArrivalsFunction"]


@pytest.mark.parametrize(
    "size, left_s, deferred",
    [(1024, 419, False), (5 << 30, 421, True), (5 << 30, 900, False)],
    ids=["1 KiB with 419 s left", "5 GiB with 421 s left", "5 GiB in a fresh invocation"],
)
def test_an_arrival_is_taken_only_with_the_time_its_bundles_size_needs(stack, size, left_s, deferred):
    """The reserve was one figure whatever the event said (420 s deployed): a 5 GiB bundle started
    with 421 s left, which its pass (390 to 682 s measured) overruns, and a 1 KiB one was deferred
    with 419 s left."""
    from unittest import mock

    from codspeed_aggregator import wiring
    from codspeed_aggregator.handlers import arrivals
    from codspeed_aggregator.settings import settings

    deployed = replace(settings(), arrival_reserve_seconds=20, arrival_mib_per_second=7)
    event = _event("arrivals-s3-object-created.json")
    event["Records"] = event["Records"][:1]
    body = json.loads(event["Records"][0]["body"])
    body["Records"][0]["s3"]["object"]["size"] = size
    event["Records"][0]["body"] = json.dumps(body)
    mine, taken = threading.get_ident(), []  # the stack's pollers may record other tests' arrivals meanwhile
    with (
        _Sent("arrivals", "sqs", "SendMessage") as sent,
        mock.patch.object(arrivals, "settings", lambda: deployed),
        mock.patch.object(
            wiring.for_arrivals().record_arrival,
            "record",
            side_effect=lambda *a: taken.append(a) if threading.get_ident() == mine else None,
        ),
    ):
        assert arrivals.handler(event, _Context(left_s * 1000)) == {"batchItemFailures": []}
    assert (len(sent.calls), len(taken)) == ((1, 0) if deferred else (0, 1))
    assert deployed.arrival_reserve(5 << 30) == pytest.approx(20 + 5120 / 7) and deployed.arrival_reserve(5 << 30) < 900


def test_a_failed_arrival_comes_back_in_minutes_not_after_the_queues_90(stack):
    from unittest import mock

    from codspeed_aggregator import wiring
    from codspeed_aggregator.handlers import arrivals
    from codspeed_aggregator.handlers.sqs_batch import AllRecordsFailed

    event = _event("arrivals-s3-object-created.json")
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = "3"
    with (
        _Sent("arrivals", "sqs", "ChangeMessageVisibility") as sent,
        mock.patch.object(wiring.for_arrivals().record_arrival, "record", side_effect=RuntimeError("S3 answered 503")),
    ):
        with pytest.raises(AllRecordsFailed, match="All records failed"):  # SQS keeps the message
            arrivals.handler(event, _Context(60_000))
    assert sent.calls == [
        (
            "ChangeMessageVisibility",
            {
                "QueueUrl": stack.resources.arrivals_queue_url,
                "ReceiptHandle": event["Records"][0]["receiptHandle"],
                "VisibilityTimeout": 240,
            },
        )
    ]
    assert not [r for r in stack.enforcer.refusals() if r[0] == "ArrivalsFunction"]
