"""Crashes injected at every step of arrival and finalization; each scenario checks that
redelivery or retry ends in exactly one forward and that nothing accepted is lost.
Shared by tests/integration/test_faults.py and bench/load.py."""

import io
import json
import time
import uuid
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
from unittest import mock

from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, put, upload_request


class Crash(BaseException):
    """The function died here (a Lambda timeout, an out-of-memory kill, a lost host): no
    ``except Exception`` of the code runs, as none would in a killed process."""


def once(original, before: bool = True):
    """A stand-in for ``original`` that crashes on its first call (before or after doing the work)."""
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1 and before:
            raise Crash("injected")
        result = original(*args, **kwargs)
        if len(calls) == 1:
            raise Crash("injected")
        return result

    return wrapper


class _BreakingStream(io.RawIOBase):
    def __init__(self, inner, after: int) -> None:
        self.inner, self.left = inner, after

    def read(self, n=-1):
        if self.left <= 0:
            raise Crash("injected mid-merge")
        data = self.inner.read(n if n > 0 else self.left)
        self.left -= len(data)
        return data


@contextmanager
def _mid_merge(agg):
    original, calls = agg.store.open, []

    @contextmanager
    def opener(key, version_id=None):
        merged = not key.endswith(".json")  # a shard's bytes (normalized copy or bundle), not an index
        calls.extend([key] if merged else [])
        with original(key, version_id) as stream:
            yield _BreakingStream(stream, 300) if merged and len(calls) == 2 else stream

    with mock.patch.object(agg.store, "open", opener):
        yield


FINALIZE_FAULTS = {
    "after the claim": lambda agg: mock.patch.object(
        agg.ledger.runs, "claim_finalize", once(agg.ledger.runs.claim_finalize, before=False)
    ),
    "mid-merge": _mid_merge,
    "after the upstream POST, before it is recorded": lambda agg: mock.patch.object(
        agg.ledger.parts, "record_announced_part", once(agg.ledger.parts.record_announced_part)
    ),
    "after the upstream POST, before the PUT": lambda agg: mock.patch.object(
        agg.upstream, "put", once(agg.upstream.put)
    ),
    "after the PUT": lambda agg: mock.patch.object(agg.upstream, "put", once(agg.upstream.put, before=False)),
    "before recording the result": lambda agg: mock.patch.object(
        agg.ledger.parts, "record_forwarded_part", once(agg.ledger.parts.record_forwarded_part)
    ),
    "after recording the result, before finishing": lambda agg: mock.patch.object(
        agg.ledger.runs, "finish", once(agg.ledger.runs.finish)
    ),
}
ARRIVAL_FAULTS = {
    "after validation, before counting": lambda agg: mock.patch.object(
        agg.ledger.shards, "record_arrival", once(agg.ledger.shards.record_arrival)
    ),
    "after counting, before publishing": lambda agg: mock.patch.object(
        agg.reports, "publish", once(agg.reports.publish)
    ),
    "after publishing, before asking to finalize": lambda agg: mock.patch.object(
        agg.queue, "request", once(agg.queue.request)
    ),
}


def _pushed(agg, project, run_id, shards=2) -> list[str]:
    keys = []
    for shard in range(1, shards + 1):
        data = bundle(4242, [f"{shard}::bench"])
        grant = agg.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request(project, run_id, str(shard), data, total=shards))
        )
        put(grant.model_dump(), data)
        keys.append(grant.key)
    return keys


def _after_lease(agg):
    return replace(agg, clock=lambda: time.time() + agg.settings.finalize_lease_seconds + 5)


def finalize_scenario(isolated, name: str) -> None:
    agg, project, run_id = isolated.aggregator, f"acme/faults-{uuid.uuid4().hex[:6]}", f"f-{uuid.uuid4().hex[:8]}"
    for key in _pushed(agg, project, run_id):
        agg.record_arrival.record(key)
    with FINALIZE_FAULTS[name](agg):
        try:
            agg.finalize_run.finalize(project, run_id)
            raise AssertionError(f"no crash was injected {name}")
        except Crash:
            pass
    assert agg.finalize_run.finalize(project, run_id) == "not_claimed"  # the dead finalizer's lease still holds the run
    assert _after_lease(agg).finalize_run.finalize(project, run_id) == "forwarded"  # SQS redelivers after the lease
    report = agg.reports.report(project, run_id)
    assert report.state == "forwarded" and report.arrived == 2, report
    assert len(isolated.upstream.uploads(run_id)) == 1, f"{name}: not exactly one upload"


def arrival_scenario(isolated, name: str) -> None:
    agg, project, run_id = isolated.aggregator, f"acme/faults-{uuid.uuid4().hex[:6]}", f"a-{uuid.uuid4().hex[:8]}"
    first, last = _pushed(agg, project, run_id)
    agg.record_arrival.record(first)
    isolated.finalize_requests()
    with ARRIVAL_FAULTS[name](agg):
        try:
            agg.record_arrival.record(last)
            raise AssertionError(f"no crash was injected {name}")
        except Crash:
            pass
    agg.record_arrival.record(last)  # SQS delivers the event again
    messages = [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    assert messages, f"{name}: the complete run was never sent to the finalizer"
    for _ in messages:
        agg.finalize_run.finalize(project, run_id)
    report = agg.reports.report(project, run_id)
    assert report.state == "forwarded" and report.arrived == 2, report
    assert len(isolated.upstream.uploads(run_id)) == 1


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_):
        yield self.data


def _error(service: str, status: int, code: str, message: str):
    """An error answer as the service's protocol writes it (JSON for DynamoDB and SQS, XML for S3)."""
    from botocore.awsrequest import AWSResponse

    if service == "s3":
        body = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
        headers = {"Content-Type": "application/xml"}
    else:
        prefix = "com.amazonaws.dynamodb.v20120810#" if service == "dynamodb" else "com.amazonaws.sqs#"
        body = json.dumps({"__type": prefix + code, "message": message}).encode()
        headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-query-error": f"{code};Sender"}
    return AWSResponse("https://fault.invalid/", status, headers, _Body(body))


# What an AWS call can answer instead of its result: botocore's retry handler sees each (a before-send
# answer), retries throttling and 5xx up to the clients' 5 attempts, and never an access denied.
AWS_FAULTS = {
    "throttling": lambda service: (
        _error(service, 503, "SlowDown", "Please reduce your request rate")
        if service == "s3"
        else _error(service, 400, "ThrottlingException", "Rate exceeded")
    ),
    "500": lambda service: _error(
        service, 500, "InternalError" if service == "s3" else "InternalServerError", "We encountered an internal error"
    ),
    "access denied": lambda service: _error(
        service,
        403,
        "AccessDenied" if service == "s3" else "AccessDeniedException",
        "not authorized to perform this action",
    ),
}


@contextmanager
def aws_fault(clients, kind: str, first: int, count: int):
    """Calls ``first`` to ``first + count - 1`` (counting every attempt, retries included, from 0) made
    with ``clients`` answer the fault ``kind``; botocore's backoff does not sleep meanwhile."""
    seen = []

    def answer(request, **kwargs):
        service = kwargs["event_name"].split(".")[1]
        seen.append(service)
        if first <= len(seen) - 1 < first + count:
            return AWS_FAULTS[kind](service)
        return None

    for made in clients:
        made.meta.events.register_first("before-send", answer, unique_id=f"fault-{id(answer)}")
    try:
        with mock.patch("botocore.endpoint.time", SimpleNamespace(sleep=lambda seconds: None)):
            yield seen
    finally:
        for made in clients:
            made.meta.events.unregister("before-send", unique_id=f"fault-{id(answer)}")
