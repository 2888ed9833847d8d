"""Random interleavings of push (two executors under one shard name), drop-in uploads (the
runner's runPartIds and hostile ones, tokenless too), duplicate events, bad bundles, retries,
close, deadline, finalize and late pushes, re-runs into the run's later attempts included, in a
run opened by its first upload or declared first; any AWS call may answer a fault (throttling, a
500, an access denied) that botocore's retry handler sees, and the step is then retried as SQS or
the client would; the upstream may answer a finalizer's sends 429 or 5xx. DESIGN's invariants are checked
after every step, the upstream's as CodSpeed
would hold it (the stand-in combines the run's parts: the last upload of each runPartId), and
every refused request is followed by a comparison of the run's items and object versions."""

import contextlib
import json
import os
import threading
import time
import uuid
from dataclasses import replace
from unittest import mock

import pytest
import requests
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters import aws
from codspeed_aggregator.adapters.upstream_http import UpstreamClient, UpstreamError
from codspeed_aggregator.adapters.upstream_tokens import UpstreamTokens
from codspeed_aggregator.domain.errors import Busy, Conflict, Unprocessable
from codspeed_aggregator.domain.keys import parse_bundle_key
from codspeed_aggregator.handlers import api as api_handler
from codspeed_aggregator.use_cases.aggregator import Aggregator
from codspeed_local.gateway import http_api_event
from codspeed_local.lambda_context import LocalContext
from codspeed_local.upstream_stub import archive_of, benchmarks_in
from codspeed_rules.names import shard_key
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import CloseRequest, OpenRequest, ShardUploadRequest
from codspeed_wire.upstream import UploadMetadata
from tests.conftest import PARTS_LIFECYCLE, TOKEN
from tests.factories import COMMIT, bundle, footprint, metadata, put, upload_request
from tests.faults import AWS_FAULTS, aws_fault
from tests.runner import folder_archive, md5_b64, walltime_folder

pytestmark = pytest.mark.slow  # over 3 s each on a 2-core machine: left out of the quick loop (-m "not slow")

SHARDS = ("1", "2", "3")
FINAL = ("forwarded", "forward_failed", "closed_empty")
EXECUTORS = ("valgrind", "walltime")
RUNNER_PART_IDS = (
    'bench-{"executor":"valgrind","run-index":0}',
    'bench-{"executor":"valgrind","run-index":1}',
    # a job named like the aggregator's own: its part and the pushed shards' are two
    'codspeed-shard-aggregator-{"executor":"valgrind","run-index":0}',
)
HOSTILE_PART_IDS = (
    'bench-{"aggregated-part":1,"executor":"valgrind"}',
    'codspeed-shard-aggregator-{"aggregated-shard":"1","executor":"valgrind"}',
)
# (kind, the first call that answers it, how many do): past the clients' 6 attempts a call fails
FAULTS = st.one_of(st.none(), st.tuples(st.sampled_from(sorted(AWS_FAULTS)), st.integers(0, 12), st.integers(1, 7)))
# what CodSpeed's API answers a POST instead
UPSTREAM_FAULTS = st.lists(st.sampled_from((429, 500, 502, 503)), max_size=4)


class Faulted(Exception):
    """The API answered what a client retries: a 503 (busy), or the 500 of an access denied."""


LAMBDA_PAYLOAD = 6 * 1024 * 1024
TOKENS_PATH = "/codspeed-aggregator/upstream-tokens"  # where the template lets the finalizer read
FALLBACK_TOKEN = "upstream-secret"  # the isolated stack's own


class RunLifecycle(RuleBasedStateMachine):
    """A run's life, step by random step, against one isolated stack (``machine_for``)."""

    isolated: object  # the isolated stack
    agg: Aggregator  # its use cases, with an upstream that reads each project's own token
    upstream_tokens: UpstreamTokens
    aws_clients: list  # the clients whose calls a fault answers

    def __init__(self):
        super().__init__()
        self.project = f"acme/sm-{uuid.uuid4().hex[:8]}"
        self.run_id = f"sm-{uuid.uuid4().hex[:10]}"
        self.pushed = []  # (shard, key, benchmark or None for a bad bundle), into the first attempt
        self.later = []  # (shard, key): pushed after the first attempt ended, into a later one
        self.current = {}  # shard -> the benchmark of its bundle counted last (the model)
        self.seen_version, self.seen_arrived = 0, 0
        self.waiting = []  # finalize messages whose handling the upstream failed: SQS delivers them again

    @initialize(declared=st.booleans(), own_token=st.booleans(), parts=st.booleans())
    def opened(self, declared, own_token, parts):
        """A run opened by its first upload, or declared first (``codspeed-client open``): then it
        takes the client's shards only, in every state and attempt. The project has an upstream
        token of its own in SSM, or goes with the stack's. Its runs go upstream in one upload, or
        in parts (the stack's parts project for it: each shard as it is counted)."""
        self.declared, self.fault_kind = declared, None
        if parts:
            self.project = PARTS_LIFECYCLE
        self.token = f"token-of-{self.project}" if own_token else FALLBACK_TOKEN
        # each example a fresh process's caches: an earlier example's token, or its "no parameter" (each
        # remembered five minutes: powertools' SSM cache, UpstreamTokens' MISSING_FOR_SECONDS), is not
        # this example's project's (the parts examples share one project)
        aws._parameters.cache_clear()
        self.agg.upstream.tokens = UpstreamTokens(
            TOKENS_PATH, FALLBACK_TOKEN, lambda parameter: aws.secret(None, parameter)
        )
        if own_token:  # the stand-in, as CodSpeed, then refuses any other (401)
            aws.client("ssm").put_parameter(
                Name=self.upstream_tokens.parameter(self.project), Value=self.token, Type="SecureString", Overwrite=True
            )
            self.isolated.upstream.project_tokens[self.project] = self.token
        elif parts:  # the parts project's own token of an earlier example, gone
            self.isolated.upstream.project_tokens.pop(self.project, None)
            with contextlib.suppress(aws.client("ssm").exceptions.ParameterNotFound):
                aws.client("ssm").delete_parameter(Name=self.upstream_tokens.parameter(self.project))
        if declared:
            self._api(
                "POST",
                "/v1/runs/open",
                OpenRequest(
                    project=self.project,
                    run_id=self.run_id,
                    total=len(SHARDS),
                    commit=COMMIT,
                    ref="refs/heads/main",
                ).model_dump(mode="json"),
            )

    def _faulted(self, fault, step):
        """Run ``step`` with ``fault`` answered by the AWS calls it picks; a step it failed is run
        again without (SQS redelivers, the client retries), and answers what that one does."""
        if fault is None:
            return step()
        kind, first, count = fault
        try:
            with aws_fault(self.aws_clients, kind, first, count):
                self.fault_kind = kind
                return step()
        except (ClientError, GetParameterError, Busy, Faulted):  # powertools wraps an SSM fault in its own
            return step()
        finally:
            self.fault_kind = None

    def _api(self, method: str, path: str, body: dict | None = None) -> dict:
        """A request to the API's own handler, as API Gateway hands it over: never a 500 but for an
        access denied, never over Lambda's 6 MB; a refusal is raised as the error it names."""
        event = http_api_event(
            method,
            path,
            {"authorization": TOKEN, "content-type": "application/json"},
            json.dumps(body).encode() if body is not None else b"",
        )
        with mock.patch.object(wiring, "for_api", lambda: self.agg):
            answer = api_handler.handler(event, LocalContext("ApiFunction"))
        status, text = answer["statusCode"], answer.get("body") or ""
        assert len(text.encode()) <= LAMBDA_PAYLOAD, (path, status, len(text))
        assert status != 500 or self.fault_kind == "access denied", (path, text)
        if status in (500, 503):
            raise Faulted(f"{status}: {text}")
        decoded = json.loads(text) if text else {}
        if status == 409:
            headers = {k.lower(): v for k, v in (answer.get("headers") or {}).items()}
            assert "retry-after" not in headers, (decoded, headers)  # a closing run takes uploads: none waits
            raise Conflict(decoded["error"])
        if status == 422:
            raise Unprocessable(decoded["error"])
        assert status < 300, (path, status, text)
        return decoded

    def _refused(self, step, errors, match):
        """A request the run must refuse: it is, with its sentence, and nothing of the run changed."""
        before = footprint(self.isolated, self.project, self.run_id)
        with pytest.raises(errors, match=match):
            step()
        assert footprint(self.isolated, self.project, self.run_id) == before  # a refusal changes nothing

    def _state(self):
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        return snapshot.run.state if snapshot else None

    @rule(shard=st.sampled_from(SHARDS), good=st.booleans(), executor=st.sampled_from(EXECUTORS), fault=FAULTS)
    def push(self, shard, good, executor, fault):
        """A client's push: each executor's shard of a name is its own shard."""
        benchmark = f"s{shard}::{executor}{len(self.pushed)}"
        if not good:
            data = b"definitely not a tar.gz"
        elif executor == "valgrind":
            data = bundle(4242, [benchmark])
        else:
            data = folder_archive(walltime_folder(4242, benchmark), gzipped=True)
        request = upload_request(
            self.project,
            self.run_id,
            shard,
            data,
            total=len(SHARDS),
            runner={"name": "codspeed-client", "version": "1.0.0", "instruments": [], "executor": executor},
        )
        ShardUploadRequest.model_validate(request)  # as the client sends it: its metadata and the same bytes
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        taking = snapshot is not None and snapshot.run.state == "open" and not snapshot.run.close.requested
        if taking and shard in snapshot.run.skipped:
            return self._refused(  # skipped when the run was opened: carried, not pushed
                lambda: self._faulted(fault, lambda: self._api("POST", "/v1/uploads", request)),
                Conflict,
                "was declared skipped",
            )
        self._granted(
            lambda: self._api("POST", "/v1/uploads", request),
            data,
            shard_key(shard, executor),
            benchmark if good else None,
            fault,
        )

    @rule(label=st.sampled_from(RUNNER_PART_IDS + HOSTILE_PART_IDS), tokenless=st.booleans(), fault=FAULTS)
    def drop_in(self, label, tokenless, fault):
        """A CodSpeed runner pointed at us (``POST /upload``) in this run's workflow: its job ``bench``
        is a group of its own; a runPartId that could stand in one of our parts is refused, and so
        is any job of a declared run."""
        benchmark = f"bench::runner{len(self.pushed)}"
        data = bundle(4343, [benchmark])
        meta = UploadMetadata.model_validate(
            metadata(
                md5_b64(data),
                owner=self.project.split("/")[0],
                repository=self.project.split("/")[1],
                tokenless=tokenless,
                run_part={
                    "runId": self.run_id,
                    "runPartId": label,
                    "jobName": label.split("-{")[0],
                    "metadata": {"job-total": 1},
                },
            )
        )

        def grant():
            accepted = self._api("POST", "/upload", meta.wire())
            return {
                "upload_url": accepted["uploadUrl"],
                "headers": {"Content-MD5": meta.profile_md5},
                "key": _key_of(accepted["uploadUrl"]),
                "run_id": accepted["runId"],
            }

        if label in HOSTILE_PART_IDS:
            return self._refused(
                lambda: self._faulted(fault, grant), Unprocessable, "names the aggregator's own run parts"
            )
        if self.declared:
            return self._refused(lambda: self._faulted(fault, grant), Conflict, "is not among what run")
        self._granted(grant, data, None, benchmark, fault)

    def _granted(self, grant, data, shard, benchmark, fault):
        """An upload granted (or refused: out of attempts), then PUT. A run closing, being finalized or
        forwarded sends it to its next attempt: a grant asked after a close never holds it."""
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        if snapshot is not None and (snapshot.run.state != "open" or snapshot.run.close.requested):
            try:  # a later attempt: its counts are not modelled, what reaches the upstream is
                granted = self._faulted(fault, grant)
            except Conflict as exc:
                assert "times: it takes no more" in str(exc)
                return
            assert granted["run_id"].startswith(f"{self.run_id}~")
            put(granted, data)
            if benchmark is not None:
                self.later.append((shard, granted["key"]))
            return
        granted = self._faulted(fault, grant)
        put(granted, data)
        self.pushed.append((shard or parse_bundle_key(granted["key"])[2], granted["key"], benchmark))

    @precondition(lambda self: self.pushed)
    @rule(shard=st.sampled_from(SHARDS), other_manifest=st.booleans(), fault=FAULTS)
    def refused_push(self, shard, other_manifest, fault):
        """A push the run must refuse, in whatever state it is (open, closing, forwarded: then
        before any next attempt is opened): another manifest than its client shards', or a shard
        outside its own manifest."""
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        if other_manifest and "" not in snapshot.run.groups:
            other_manifest = False  # no client shard yet: any manifest would be the first
        total, name = (len(SHARDS) + 1, shard) if other_manifest else (len(SHARDS), "9")
        data = bundle(4242, [f"s{shard}::refused"])
        request = upload_request(self.project, self.run_id, name, data, total=total)
        ShardUploadRequest.model_validate(request)
        self._refused(
            lambda: self._faulted(fault, lambda: self._api("POST", "/v1/uploads", request)),
            (Conflict, Unprocessable),
            "manifest|takes no more|declared skipped by its close",
        )

    @precondition(lambda self: self.pushed)
    @rule(pick=st.integers(min_value=0), times=st.integers(min_value=1, max_value=3), fault=FAULTS)
    def deliver(self, pick, times, fault):
        """An S3 event, delivered once or more (SQS duplicates), in any order; a delivery a fault
        failed is delivered again."""
        shard, key, benchmark = self.pushed[pick % len(self.pushed)]
        before = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        outcomes = [self._faulted(fault, lambda: self.agg.record_arrival.record(key))] + [
            self.agg.record_arrival.record(key) for _ in range(times - 1)
        ]
        first = outcomes[0]
        if benchmark is None:
            assert outcomes[0] in ("rejected", "duplicate") and outcomes[1:] == ["duplicate"] * (times - 1)
            after = self.agg.ledger.reads.snapshot(self.project, self.run_id)

            def others(snap):
                return {n: (s.state, s.upload_id) for n, s in snap.shards.items() if n != shard}

            assert others(after) == others(before)  # a bad bundle changes nothing else
        else:
            assert outcomes[1:] == ["duplicate"] * (times - 1)
            assert first in ("recorded", "duplicate", "late"), first
            counted = self.agg.ledger.reads.snapshot(self.project, self.run_id).arrived().get(shard)
            # counted by the delivery the fault failed
            if first == "recorded" or (
                fault and first == "duplicate" and counted and counted.key == key and before.run.state == "open"
            ):
                assert before.run.state == "open"
                self.current[shard] = benchmark

    @precondition(lambda self: self.project == PARTS_LIFECYCLE)
    @rule(shard=st.sampled_from(SHARDS))
    def repush_while_its_send_is_on_its_way(self, shard):
        """A parts run's shard's job re-run while its send is on its way (a slow PUT): the re-run's own
        message finds the part claimed, and that send sends the newer version after its own, so
        the newer lands last and stays upstream."""
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        if snapshot is not None and (snapshot.run.state != "open" or snapshot.run.close.requested):
            return
        self._repush(shard)
        put, meanwhile = self.agg.upstream.put, []

        def other_invocations():  # the API's grant, the arrival, the re-run's own message: each its own role
            self._repush(shard)
            meanwhile.append(self.agg.forward_shard.forward(self.project, self.run_id, shard))

        def slow_put(*args, **kwargs):
            if not meanwhile:
                racing = threading.Thread(target=other_invocations)
                racing.start()
                racing.join()
            return put(*args, **kwargs)

        self.agg.upstream.put = slow_put
        try:
            assert self.agg.forward_shard.forward(self.project, self.run_id, shard) == "forwarded"
        finally:
            del self.agg.upstream.put
        assert meanwhile == ["not_claimed"]
        held = self.isolated.upstream.combined(self.project)[(self.project, self.run_id)][
            pushed_part_id(shard, "valgrind")
        ]
        assert benchmarks_in(archive_of(held)) == {self.current[shard]}  # the newer, landed last

    def _repush(self, shard):
        """The shard's job run again, its bundle counted at once."""
        benchmark = f"s{shard}::valgrind-again{len(self.pushed)}"
        data = bundle(4242, [benchmark])
        grant = self.agg.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request(self.project, self.run_id, shard, data, total=len(SHARDS)))
        ).model_dump()
        put(grant, data)
        self.pushed.append((shard, grant["key"], benchmark))
        assert self.agg.record_arrival.record(grant["key"]) == "recorded"
        self.current[shard] = benchmark

    @rule(skip=st.lists(st.sampled_from(SHARDS), unique=True, max_size=2), fault=FAULTS)
    def close(self, skip, fault):
        if self._state() is None:
            return
        request = CloseRequest(project=self.project, run_id=self.run_id, skip=skip).model_dump(mode="json")
        before = footprint(self.isolated, self.project, self.run_id)
        try:
            self._faulted(fault, lambda: self._api("POST", "/v1/runs/close", request))
        except Unprocessable as exc:  # a run of runner jobs alone names no shard to skip
            assert "cannot skip" in str(exc) and skip
            assert footprint(self.isolated, self.project, self.run_id) == before

    @rule()
    def deadline(self):
        replace(
            self.agg, clock=lambda: time.time() + self.agg.settings.run_deadline_seconds + 60
        ).sweep_deadlines.sweep()

    @precondition(lambda self: self.later)
    @rule(pick=st.integers(min_value=0))
    def deliver_later(self, pick):
        shard, key = self.later[pick % len(self.later)]
        assert self.agg.record_arrival.record(key) in ("recorded", "duplicate", "late")

    @rule(fault=FAULTS, upstream=UPSTREAM_FAULTS)
    def finalize(self, fault, upstream):
        """The finalizer's messages, the first with ``fault`` at an AWS call; the upstream answers
        its next POSTs ``upstream`` (past the client's 3 tries a send fails, and is sent again later)."""
        self.isolated.upstream.failures[:] = upstream
        try:
            self._finalize(fault)
        finally:
            self.isolated.upstream.failures.clear()

    def _finalize(self, fault):
        waiting, self.waiting = self.waiting, []
        for message in [*waiting, *self.isolated.finalize_requests()]:
            if message["run_id"].split("~")[0] == self.run_id:
                try:
                    if message.get("shard"):  # a parts run's shard, sent as it was counted
                        self._faulted(
                            fault,
                            lambda message=message: self.agg.forward_shard.forward(
                                self.project, message["run_id"], message["shard"]
                            ),
                        )
                    else:
                        self._faulted(
                            fault,
                            lambda message=message: self.agg.finalize_run.finalize(
                                self.project, message["run_id"], message.get("part")
                            ),
                        )
                except UpstreamError:  # the handler fails the message: SQS brings it back later
                    self.waiting.append(message)
                fault = None  # the first message's only
        self._counted_by_the_close()

    def _counted_by_the_close(self):
        """A bundle in the bucket whose event was not delivered past its backstop is counted by the close
        itself (``CloseBarrier``), as its arrival would have counted it: the model counts it too."""
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        arrived = snapshot.arrived() if snapshot else {}
        for shard, key, benchmark in self.pushed:
            if benchmark is not None and shard in arrived and arrived[shard].key == key:
                self.current[shard] = benchmark

    @invariant()
    def counted_once_and_never_backwards(self):
        snapshot = self.agg.ledger.reads.snapshot(self.project, self.run_id)
        if snapshot is None:
            return
        arrived = snapshot.arrived()
        assert set(arrived) == set(self.current)  # invariant 1: the distinct shards accepted
        assert snapshot.run.arrived_count == len(arrived)  # the run's own count is as exact
        assert {n: self.agg.results.read(s.key).names for n, s in arrived.items()} == {
            n: [b] for n, b in self.current.items()
        }
        report = self.agg.reports.report(self.project, self.run_id)
        assert report.version >= self.seen_version and report.arrived >= self.seen_arrived  # invariant 4
        self.seen_version, self.seen_arrived = report.version, report.arrived

    @invariant()
    def forwarded_under_the_projects_own_token(self):
        """Its own token when it has one, else the stack's, or none for a tokenless run: never another's."""
        for upload in self.isolated.upstream.uploads():
            meta = json.loads((upload / "metadata.json").read_text())
            # a parts project's runs are many examples'
            ran = (meta.get("runPart") or {}).get("runId", "").split("~")[0]
            if f"{meta.get('owner')}/{meta.get('repository')}" == self.project and ran == self.run_id:
                sent = {k.lower(): v for k, v in json.loads((upload / "post-headers.json").read_text()).items()}
                assert sent.get("authorization") in (None, self.token), (sent.get("authorization"), self.token)
                assert sent.get("authorization") is not None or meta.get("tokenless")

    @invariant()
    def each_benchmark_once_upstream_with_everything_accepted(self):
        held = {
            part: benchmarks_in(archive_of(upload))
            for parts in self.isolated.upstream.combined(self.project).values()
            for part, upload in parts.items()
        }
        assert not self.isolated.upstream.benchmarks_twice(self.project)  # invariant 2: whatever the attempts
        latest = self.agg.reports.report(self.project, self.run_id) if self._state() else None
        if latest is not None and latest.state == "forwarded":  # invariant 3: nothing accepted is lost
            forwarded = self.agg.ledger.reads.snapshot(self.project, latest.run_id)
            upstream = {b for found in held.values() for b in found}
            for shard in forwarded.arrived().values():
                names = self.agg.results.read(shard.key).names
                assert set(names) <= upstream, (shard.name, names, held)


def machine_for(isolated) -> type[RunLifecycle]:
    tokens = UpstreamTokens(TOKENS_PATH, FALLBACK_TOKEN, lambda parameter: aws.secret(None, parameter))
    agg = replace(
        isolated.aggregator,
        upstream=UpstreamClient(
            isolated.aggregator.upstream.url,
            FALLBACK_TOKEN,
            timeout=10,
            attempts=3,
            sleep=lambda s: None,
            tokens=tokens,
        ),
    )
    clients = [aws.client("dynamodb"), aws.client("s3"), aws.client("sqs"), aws.client("ssm")]
    attributes = {"isolated": isolated, "agg": agg, "upstream_tokens": tokens, "aws_clients": clients}
    return type("RunLifecycle", (RunLifecycle,), attributes)


def _key_of(upload_url: str) -> str:
    """The bundle key a presigned PUT URL names (path-style: /bucket/key)."""
    return requests.utils.unquote(requests.utils.urlparse(upload_url).path.split("/", 2)[2])


def test_run_lifecycle_holds_the_invariants_under_random_interleavings(isolated):
    run_state_machine_as_test(
        machine_for(isolated),
        settings=settings(
            max_examples=int(os.environ.get("LIFECYCLE_EXAMPLES", 8)),
            stateful_step_count=14,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
