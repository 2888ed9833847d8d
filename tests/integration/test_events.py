"""Every file in events/ drives its handler against the local stack, in the order a run lives."""

import json
from pathlib import Path

import pytest

from codspeed_aggregator.domain.ledger import UploadRecord
from codspeed_aggregator.local.lambda_context import LocalContext
from tests.factories import bundle, wait_for

EVENTS = Path(__file__).resolve().parents[2] / "events"


def _event(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def _api(name: str) -> tuple[int, dict]:
    from codspeed_aggregator.handlers import api

    answer = RECORDER.calling("ApiFunction", api.handler, _event(name), LocalContext("codspeed-api"))
    return answer["statusCode"], json.loads(answer["body"])


def test_every_event_file_is_exercised():
    assert {p.name for p in EVENTS.glob("*.json")} - {"env.json"} == {
        "api-request-upload.json", "api-drop-in-upload.json", "api-close-run.json", "api-read-report.json",
        "arrivals-s3-object-created.json", "finalizer-finalize-run.json", "sweeper-scheduled.json",
        "api-webhook-refresh.json", "api-webhook-github-workflow-run.json",
    }


class CallRecorder:
    """The IAM actions each function's calls need, recorded with botocore's hooks (this thread only)."""

    TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
    S3 = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket", "CreateMultipartUpload": "PutObject",
          "UploadPart": "PutObject", "CompleteMultipartUpload": "PutObject"}

    def __init__(self):
        import threading

        from codspeed_aggregator import wiring
        from codspeed_aggregator.adapters.aws import client

        self.local, self.actions = threading.local(), {}
        for function in (wiring.API, wiring.ARRIVALS, wiring.FINALIZER, wiring.SWEEPER):
            for service in ("dynamodb", "s3", "sqs", "ssm"):
                client(service, function).meta.events.register("before-parameter-build.*.*", self._hook(service))

    def _hook(self, service):
        def hook(params, model, **_):
            function = getattr(self.local, "function", None)
            if function is None:
                return
            if model.name == "TransactWriteItems":
                names = {self.TRANSACT[kind] for item in params["TransactItems"] for kind in item}
            elif model.name == "GetObject" and params.get("VersionId"):
                names = {"GetObjectVersion"}
            else:
                names = {self.S3.get(model.name, model.name) if service == "s3" else model.name}
            self.actions.setdefault(function, set()).update(f"{service}:{n}" for n in names)
        return hook

    def calling(self, function, fn, *args):
        self.local.function = function
        try:
            return fn(*args)
        finally:
            self.local.function = None


RECORDER = None


def test_the_sample_events_walk_a_run_through_every_handler(stack):
    from codspeed_aggregator import wiring
    from codspeed_aggregator.handlers import arrivals, finalizer, sweeper

    global RECORDER
    RECORDER = CallRecorder()

    status, grant = _api("api-request-upload.json")
    assert status == 201 and grant["key"].startswith("bundles/acme/widgets/7044765741/2/")

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
    key = json.loads(record["Records"][0]["body"])["Records"][0]["s3"]["object"]["key"]
    upload_id = key.rsplit("/", 1)[1].removesuffix(".tar.gz")
    agg = wiring.finalizer()  # not recorded: this thread calls as no function
    agg.ledger.shards.add_upload("acme/widgets", "7044765741", UploadRecord("2", upload_id, None, "0.5", metadata={"profileMd5": "x"}))
    agg.store.s3.put_object(Bucket=agg.store.bucket, Key=key, Body=bundle())
    answer = RECORDER.calling("ArrivalsFunction", arrivals.handler, record, LocalContext("codspeed-arrivals"))
    assert answer == {"batchItemFailures": []}

    status, report = _api("api-read-report.json")
    assert status == 200 and report["arrived"] == 1 and report["partial"] is True
    assert {s["name"]: s["state"] for s in report["shards"]}["2"] == "arrived"

    status, closed = _api("api-close-run.json")
    assert status == 202 and closed["state"] == "closing"
    answer = RECORDER.calling("FinalizerFunction", finalizer.handler, _event("finalizer-finalize-run.json"),
                              LocalContext("codspeed-finalizer"))
    assert answer == {"batchItemFailures": []}
    final = wait_for(lambda: (r := _api("api-read-report.json")[1])["state"] == "forwarded" and r)
    assert {s["name"]: s["state"] for s in final["shards"]} == {"1": "missing", "2": "arrived", "3": "missing", "4": "skipped"}

    assert "closed" in RECORDER.calling("SweeperFunction", sweeper.handler, _event("sweeper-scheduled.json"),
                                        LocalContext("codspeed-sweeper"))

    # The sample finalize message found its run already claimed by the stack's own poller:
    # finalize one more run here, so that the finalizer's whole forward is recorded too.
    from codspeed_wire.api import ShardUploadRequest
    from tests.factories import put, upload_request

    for shard in ("1", "2"):  # two valgrind shards: merged, spooled to S3, sent from there
        data = bundle(pid=100 + int(shard))
        grant = agg.uploads.grant(ShardUploadRequest.model_validate(upload_request("acme/iam", "iam-1", shard, data, total=3)))
        put(grant.model_dump(), data)
        agg.arrivals.record(grant.key, len(data))
    message = _event("finalizer-finalize-run.json")
    message["Records"][0]["body"] = json.dumps({"project": "acme/iam", "run_id": "iam-1", "reason": "close"})
    RECORDER.calling("FinalizerFunction", finalizer.handler, message, LocalContext("codspeed-finalizer"))
    assert agg.reports.report("acme/iam", "iam-1").state == "forwarded"

    # Every call each function made is one its policy in template.yaml allows.
    from tests.integration.test_template import LEAST_PRIVILEGE

    for function, actions in RECORDER.actions.items():
        assert actions <= LEAST_PRIVILEGE[function], (function, actions - LEAST_PRIVILEGE[function])
    assert set(RECORDER.actions) == set(LEAST_PRIVILEGE)
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "s3:PutObjectTagging"} <= RECORDER.actions["FinalizerFunction"]
    assert "s3:PutObject" in RECORDER.actions["FinalizerFunction"]  # the spool's multipart upload


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


def test_an_arrivals_batch_stops_before_the_invocation_runs_out_and_fails_the_rest_back(stack):
    from codspeed_aggregator.handlers import arrivals

    event = _event("arrivals-s3-object-created.json")
    second = {**event["Records"][0], "messageId": "second-message"}
    event["Records"].append(second)
    body = json.loads(second["body"])
    body["Records"][0]["s3"]["object"]["key"] = "bundles/acme/budget/run-1/1/nobody-granted-this.tar.gz"
    for record in event["Records"]:
        record["body"] = json.dumps(body)
    running_out = arrivals.handler(event, _Context(60_000, 5_000))  # the first fits, the second would not
    assert running_out == {"batchItemFailures": [{"itemIdentifier": "second-message"}]}
    assert arrivals.handler(event, _Context(60_000)) == {"batchItemFailures": []}  # an ungranted key: ignored, done
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    with pytest.raises(BatchProcessingError):  # none fits: the invocation fails and SQS delivers all again
        arrivals.handler(event, _Context(5_000))
