"""Forwarding in parts: each shard of a parts run goes upstream as its own run part the moment it is
counted, once, whatever the deliveries, re-runs, failures and closes; its finalizer sends only
what no shard sent. Against moto's server and the stand-in upstream, driven step by step."""

import json
import threading
import time
import uuid
from dataclasses import replace
from types import SimpleNamespace
from unittest import mock
from urllib.parse import unquote, urlsplit

import pytest
import requests
from botocore.exceptions import ClientError

from codspeed_aggregator.adapters.upstream_http import UpstreamError
from codspeed_local.upstream_stub import archive_of, benchmarks_in
from codspeed_rules.runner_json import pushed_part_id
from tests.factories import bundle, grant, push, put


@pytest.fixture
def in_parts(isolated):
    """The isolated aggregator in parts mode; the queue emptied of what earlier tests left."""
    isolated.finalize_requests()
    return replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, forward_mode="parts"))


def _arrive(agg, project, run_id, shard, data, total=3) -> None:
    agg.record_arrival.record(push(agg, project, run_id, shard, data, total=total)["key"])


def _shard_messages(isolated) -> list[str]:
    return [m["shard"] for m in isolated.finalize_requests() if m.get("shard")]


def _parts(isolated, run_id) -> list[str]:
    """The runPartId of each upload upstream, oldest first."""
    return [
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in isolated.upstream.uploads(run_id)
    ]


def _footprint(agg, project, run_id) -> dict:
    return {
        item["sk"]["S"]: item
        for item in agg.ledger.reads.db.query(
            TableName=agg.settings.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"RUN#{project}#{run_id}"}},
        )["Items"]
    }


@pytest.mark.slow
def test_each_shard_goes_upstream_as_it_is_counted_once_and_the_finalizer_sends_none_again(
    in_parts, isolated, project, run_id
):
    for index in (1, 2):
        _arrive(in_parts, project, run_id, str(index), bundle(4200 + index, [f"t{index}::b"]))
    assert _shard_messages(isolated) == ["1", "2"]
    assert [in_parts.forward_shard.forward(project, run_id, s) for s in ("1", "2", "1")] == [
        "forwarded",
        "forwarded",
        "upstream",
    ]
    assert _parts(isolated, run_id) == [pushed_part_id("1", "valgrind"), pushed_part_id("2", "valgrind")]
    shown = {s.name: s.upstream for s in in_parts.reports.report(project, run_id).shards}
    assert shown == {"1": True, "2": True, "3": False}

    _arrive(in_parts, project, run_id, "3", bundle(4203, ["t3::b"]))
    messages = isolated.finalize_requests()
    assert [(m["reason"], m.get("shard")) for m in messages if m["run_id"] == run_id] == [
        ("shard", "3"),
        ("complete", None),
    ]
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"  # the close came first: 3 goes with it
    assert in_parts.forward_shard.forward(project, run_id, "3") == "not_open"
    assert _parts(isolated, run_id) == [pushed_part_id(s, "valgrind") for s in ("1", "2", "3")]
    assert not isolated.upstream.benchmarks_twice(project)
    report = in_parts.reports.report(project, run_id)
    assert (
        report.state == "forwarded"
        and report.upstream.message.startswith("3 shards, each its own part upstream (1 sent at the end, ")
        and "merged" not in report.upstream.message
    )


@pytest.mark.slow
def test_a_re_run_shard_replaces_its_own_part(in_parts, isolated, project, run_id):
    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::first"]), total=2)
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    _arrive(in_parts, project, run_id, "1", bundle(4211, ["t1::again"]), total=2)  # the job re-run before the run ended
    assert _shard_messages(isolated) == ["1", "1"]
    assert (
        in_parts.ledger.reads.snapshot(project, run_id).shards["1"].upstream is None
    )  # its re-run is not upstream yet
    assert in_parts.reports.report(project, run_id).shards[0].upstream  # the report says so once its send publishes
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    assert _parts(isolated, run_id) == [pushed_part_id("1", "valgrind")] * 2  # the same part: CodSpeed keeps the last
    _arrive(in_parts, project, run_id, "2", bundle(4202, ["t2::b"]), total=2)
    assert in_parts.forward_shard.forward(project, run_id, "2") == "forwarded"
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"
    combined = isolated.upstream.combined(project)[(project, run_id)]
    assert sorted(combined) == [pushed_part_id("1", "valgrind"), pushed_part_id("2", "valgrind")]
    assert len(isolated.upstream.uploads(run_id)) == 3 and not isolated.upstream.benchmarks_twice(project)


def test_a_close_while_a_shard_is_sent_sends_it_once_and_the_run_ends(in_parts, isolated, project, run_id, monkeypatch):
    """The run's finalizer plans the shard the shard's send holds: it leaves it; the send, once
    upstream, asks the finalizer's parts again, and that part is recorded without a second send."""
    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::b"]))
    isolated.finalize_requests()
    announce, closed = in_parts.upstream.announce, []

    def close_meanwhile(metadata):
        closed.append(in_parts.finalize_run.finalize(project, run_id))  # the deadline, or a close, right now
        return announce(metadata)

    monkeypatch.setattr(in_parts.upstream, "announce", close_meanwhile)
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    monkeypatch.setattr(in_parts.upstream, "announce", announce)
    assert closed == ["finalizing"]
    parts = [m["part"] for m in isolated.finalize_requests() if m.get("part") is not None]
    assert parts == [0]
    assert in_parts.finalize_run.finalize(project, run_id, 0) == "forwarded"
    assert _parts(isolated, run_id) == [pushed_part_id("1", "valgrind")]


def test_a_failed_send_is_said_on_the_run_and_retried_for_that_shard_alone(in_parts, isolated, project, run_id):
    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::b"]))
    _arrive(in_parts, project, run_id, "2", bundle(4202, ["t2::b"]))
    isolated.finalize_requests()
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    before = _footprint(in_parts, project, run_id)
    isolated.upstream.failures.extend([503, 503, 503])
    with pytest.raises(UpstreamError, match="503"):
        in_parts.forward_shard.forward(project, run_id, "2")
    after = _footprint(in_parts, project, run_id)
    changed = {sk for sk in before.keys() | after.keys() if before.get(sk) != after.get(sk)}
    # its claim, released, and the shard noted (its tally, a change note): nothing of the run or of shard 1
    assert {sk.split("#")[0] for sk in changed} == {"~CLAIM", "SHARD", "RUN", "~NOTE"}, changed
    assert {sk for sk in changed if sk.startswith(("SHARD", "RUN"))} == {
        "SHARD#2",
        next(sk for sk in changed if sk.startswith("RUN#TALLY#")),
    }, changed
    [entry] = [s for s in in_parts.reports.report(project, run_id).shards if s.name == "2"]
    assert not entry.upstream and entry.reason.startswith("not upstream yet, sent again shortly: "), entry
    assert in_parts.forward_shard.forward(project, run_id, "2") == "forwarded"  # the message's retry
    [entry] = [s for s in in_parts.reports.report(project, run_id).shards if s.name == "2"]
    assert entry.upstream and entry.reason is None
    assert _parts(isolated, run_id) == [pushed_part_id("1", "valgrind"), pushed_part_id("2", "valgrind")]


def test_a_run_opened_in_one_upload_stays_in_it_after_the_stack_turns_parts(isolated, in_parts, project, run_id):
    merged = isolated.aggregator
    _arrive(merged, project, run_id, "1", bundle(4201, ["t1::b"]), total=2)
    _arrive(in_parts, project, run_id, "2", bundle(4202, ["t2::b"]), total=2)  # the same run, after the switch
    assert _shard_messages(isolated) == []
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1  # one merged part: no benchmark went twice


def test_a_re_push_while_its_first_send_is_on_its_way_is_sent_after_it(
    in_parts, isolated, project, run_id, monkeypatch
):
    """The claim is the part's runPartId's, not its version's: the re-pushed shard's own message
    finds the first send holding the part, and that send sends the newer version after its own,
    so the newer lands last and stays upstream (it was the older, the ledger saying the newer)."""
    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::first"]), total=2)
    isolated.finalize_requests()
    put, meanwhile = in_parts.upstream.put, []

    def elsewhere():  # other invocations (the API's grant, an arrival, the finalizer's message): their own roles
        meanwhile.append("re-pushed")
        _arrive(in_parts, project, run_id, "1", bundle(4211, ["t1::again"]), total=2)
        meanwhile.append(in_parts.forward_shard.forward(project, run_id, "1"))

    def slow_put(url, archive, size, md5, gzipped):
        if not meanwhile:  # the first PUT is slow: the job is re-run and its message handled before it lands
            other = threading.Thread(target=elsewhere)
            other.start()
            other.join()
        return put(url, archive, size, md5, gzipped=gzipped)

    monkeypatch.setattr(in_parts.upstream, "put", slow_put)
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    assert meanwhile == ["re-pushed", "not_claimed"]
    [first, last] = isolated.upstream.uploads(run_id)
    assert benchmarks_in(archive_of(first)) == {"t1::first"} and benchmarks_in(archive_of(last)) == {"t1::again"}
    held = isolated.upstream.combined(project)[(project, run_id)][pushed_part_id("1", "valgrind")]
    assert benchmarks_in(archive_of(held)) == {"t1::again"}
    [entry] = [s for s in in_parts.reports.report(project, run_id).shards if s.name == "1"]
    assert entry.upstream and entry.attempt == 2  # the ledger says what the upstream holds
    assert in_parts.forward_shard.forward(project, run_id, "1") == "upstream"  # that message again: nothing more sent
    assert len(isolated.upstream.uploads(run_id)) == 2


@pytest.mark.parametrize("kind", ["access denied", "throttling"])
def test_a_failed_record_after_a_send_releases_the_claim_and_the_retry_goes_on_at_once(
    in_parts, isolated, project, run_id, kind
):
    """The send reached the upstream and its record failed (its transaction refused, or throttled past
    the client's retries): the claim is released, so the message's retry sends again now instead of
    waiting out the lease with the run unable to end."""
    from tests.faults import AWS_FAULTS

    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::b"]), total=2)
    isolated.finalize_requests()
    db, failed = in_parts.forward_shard.parts.db, []

    def refuse_the_record(request, **kwargs):
        if b"SET upstream" in request.body:  # every try of it, botocore's own retries included
            failed.append(1)
            return AWS_FAULTS[kind]("dynamodb")
        return None

    db.meta.events.register_first(
        "before-send.dynamodb.TransactWriteItems", refuse_the_record, unique_id="refuse-record"
    )
    try:
        with mock.patch("botocore.endpoint.time", SimpleNamespace(sleep=lambda seconds: None)):
            with pytest.raises(ClientError):
                in_parts.forward_shard.forward(project, run_id, "1")
    finally:
        db.meta.events.unregister("before-send.dynamodb.TransactWriteItems", unique_id="refuse-record")
    claims = [item for sk, item in _footprint(in_parts, project, run_id).items() if sk.startswith("~CLAIM#")]
    assert [c["lease_until"]["N"] for c in claims] == ["0"]
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"  # the retry: not "not_claimed" for 960 s
    assert len(isolated.upstream.uploads(run_id)) == 2  # sent again under its runPartId: it replaces itself


@pytest.mark.slow
def test_a_skipped_shard_is_left_to_codspeed_and_still_shown_carried(in_parts, isolated, project, run_id):
    """In the parts mode nothing of a skipped shard goes upstream: CodSpeed fills it from the
    baseline and marks it skipped. It went as its own part, under the pull request's commit, with
    the baseline's profile: CodSpeed showed the baseline's figures as measured on the commit."""
    from codspeed_wire.api import CloseRequest

    main = f"main-{run_id}"
    for shard in ("1", "2", "3"):
        _arrive(in_parts, project, main, shard, bundle(4300 + int(shard), [f"t{shard}::main"]))
        assert in_parts.forward_shard.forward(project, main, shard) == "forwarded"  # each upstream as it landed
    assert isolated.finalize_all(project, main, in_parts) == "forwarded"
    isolated.finalize_requests()
    pr = {"ref": "refs/pull/7/merge", "baseRef": "main"}
    for shard in ("1", "2"):
        in_parts.record_arrival.record(
            push(in_parts, project, run_id, shard, bundle(4400 + int(shard), [f"t{shard}::pr"]), total=3, **pr)["key"]
        )
        assert in_parts.forward_shard.forward(project, run_id, shard) == "forwarded"
    closed = in_parts.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert closed.message == (
        "the run ends, each shard upstream as its own part, once every bundle in the bucket is counted and every "
        "upload URL handed out before the close is used or has expired"
    )
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"

    assert _parts(isolated, run_id) == [pushed_part_id("1", "valgrind"), pushed_part_id("2", "valgrind")]  # no third
    held = isolated.upstream.combined(project)[(project, run_id)]
    assert {b for u in held.values() for b in benchmarks_in(archive_of(u))} == {"t1::pr", "t2::pr"}
    report = in_parts.reports.report(project, run_id)
    carried = {s.name: s for s in report.shards}["3"]
    assert carried.state == "carried" and carried.source == {"run_id": main, "commit": report.commit}
    assert (
        "1 carried, left to CodSpeed's baseline" in report.upstream.message and "merged" not in report.upstream.message
    )
    # its upstream is its own: the carried shard's part was main's run's, which this run never sent
    mains = set(in_parts.reports.report(project, main).upstream.run_id.split(","))
    own = {s.upstream_run_id for s in report.shards if s.state == "arrived"}
    assert set(report.upstream.run_id.split(",")) == own and not own & mains
    # a carried shard is done in every summary; ``arrived`` keeps its meaning (measured here)
    assert (report.arrived, report.carried) == (2, 1)
    from codspeed_aggregator.domain.notification import commit_status
    from codspeed_wire.markdown import render_markdown

    assert "forwarded, 3/3 shards in (2 measured, 1 carried)" in render_markdown(report)
    assert commit_status(report) == ("success", "forwarded 3/3 shards (2 measured, 1 carried)")


@pytest.mark.slow
def test_a_run_that_measures_nothing_gives_codspeed_its_commit_with_one_empty_part(in_parts, isolated, project, run_id):
    """Every shard skipped in the parts mode: nothing of the baseline goes up as this commit's, yet
    CodSpeed gets a run for it, one part with no benchmark and ``allowEmpty``, as the runner sends one."""
    from codspeed_aggregator.domain.upstream_parts import empty_part_id
    from codspeed_wire.api import OpenRequest
    from codspeed_wire.upstream import UploadMetadata
    from tests.factories import COMMIT, md5_b64, metadata

    main = f"main-{run_id}"
    for shard in ("1", "2"):
        _arrive(in_parts, project, main, shard, bundle(4500 + int(shard), [f"t{shard}::main"]), total=2)
    assert isolated.finalize_all(project, main, in_parts) == "forwarded"
    isolated.finalize_requests()
    owner, repository = project.split("/")
    stated = metadata(md5_b64(b""), owner=owner, repository=repository, ref="refs/pull/8/merge", baseRef="main")
    in_parts.open_run.open(
        OpenRequest(
            project=project,
            run_id=run_id,
            total=2,
            skip=["1", "2"],
            commit=COMMIT,
            ref="refs/pull/8/merge",
            base_ref="main",
            metadata=UploadMetadata.model_validate(stated),
        )
    )
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"

    [upload] = isolated.upstream.uploads(run_id)
    sent = json.loads((upload / "metadata.json").read_text())
    assert sent["runPart"]["runPartId"] == empty_part_id() and sent["allowEmpty"] is True
    assert sent["commitHash"] == COMMIT and not benchmarks_in(archive_of(upload))  # nothing of main's as this commit's
    report = in_parts.reports.report(project, run_id)
    assert (report.arrived, report.carried) == (0, 2) and {s.state for s in report.shards} == {"carried"}
    assert report.upstream.message.startswith(
        "nothing measured on this commit: one part with no benchmark (allowEmpty)"
    )


def _objects(agg, run_id: str) -> list[str]:
    """Every object version the bucket holds of a run, by key."""
    pages = agg.store.s3.get_paginator("list_object_versions").paginate(Bucket=agg.store.bucket)
    return [v["Key"] for page in pages for v in page.get("Versions", []) if f"/{run_id}/" in v["Key"]]


def test_a_run_of_parts_keeps_bundles_results_plan_and_reports_and_no_normalized_copy(
    in_parts, isolated, project, run_id
):
    """Every valgrind arrival wrote a normalized copy and its index (2 PUTs a shard, 1.15x the bundles'
    bytes), for a merge that a run of parts never makes."""
    for shard in ("1", "2"):
        _arrive(in_parts, project, run_id, shard, bundle(4200 + int(shard), [f"t{shard}::b"]), total=2)
        assert in_parts.forward_shard.forward(project, run_id, shard) == "forwarded"
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"
    assert {key.split("/")[0] for key in _objects(in_parts, run_id)} == {"bundles", "results", "plans", "reports"}
    merged = f"{run_id}-merged"  # a one-upload run of the same stack: its bundles are made ready to splice
    isolated.aggregator.record_arrival.record(push(isolated.aggregator, project, merged, "1", bundle(), total=1)["key"])
    assert "normalized" in {key.split("/")[0] for key in _objects(in_parts, merged)}


def test_an_arrival_whose_shard_goes_upstream_next_leaves_the_publish_to_its_send(in_parts, isolated, project, run_id):
    """The report was published twice for each upload: after the arrival, and after the send."""

    def reports() -> list[str]:
        return [k for k in _objects(in_parts, run_id) if k.startswith("reports/") and k.endswith(".json")]

    _arrive(in_parts, project, run_id, "1", bundle(4201, ["t1::b"]), total=2)
    assert reports() == []  # its send, queued, publishes it
    assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    assert len(reports()) == 1
    report = in_parts.reports.report(project, run_id)
    assert report.arrived == 1 and report.shards[0].upstream  # both, in one report


def test_a_shard_is_sent_with_one_read_of_its_bundle_the_md5_its_upload_url_signed(in_parts, isolated, project, run_id):
    """Its send read the bundle twice: once through for its MD5, once to PUT it."""
    data = bundle(4201, ["t1::b"])
    _arrive(in_parts, project, run_id, "1", data, total=2)
    got = []
    hook = lambda params, **_: got.append(params.get("Key"))  # noqa: E731 -- a hook, named where it is registered
    in_parts.store.s3.meta.events.register("before-parameter-build.s3.GetObject", hook)
    try:
        assert in_parts.forward_shard.forward(project, run_id, "1") == "forwarded"
    finally:
        in_parts.store.s3.meta.events.unregister("before-parameter-build.s3.GetObject", hook)
    assert sum(1 for key in got if key.startswith("bundles/")) == 1
    [upload] = isolated.upstream.uploads(run_id)
    assert archive_of(upload).read_bytes() == data  # the upstream checked its Content-MD5: the signed one held


def test_a_run_of_parts_tags_its_bundles_for_their_short_retention_and_keeps_carried_results_not_bundles(
    in_parts, isolated, project, run_id
):
    """A run of parts kept its bundles as long as a merge's (BundleRetentionDays, then 15 days as
    noncurrent versions), and copied each carried shard's bundle beside the branch's run: nothing
    reads them once each is upstream; a later run reads a carried shard's results."""
    from codspeed_aggregator.domain.keys import run_bundles_prefix
    from codspeed_wire.api import CloseRequest

    s3 = in_parts.store.s3

    def tags(run: str) -> set[tuple[str, str]]:
        keys = in_parts.store.listed_under(run_bundles_prefix(project, run))
        found = (s3.get_object_tagging(Bucket=in_parts.store.bucket, Key=k)["TagSet"] for k in keys)
        return {(t["Key"], t["Value"]) for tag_set in found for t in tag_set}

    received, skipping = f"main-a-{run_id}", f"main-b-{run_id}"
    for name in ("1", "2"):
        _arrive(in_parts, project, received, name, bundle(4200 + int(name), [f"t{name}::a"]), total=2)
        assert in_parts.forward_shard.forward(project, received, name) == "forwarded"
    assert isolated.finalize_all(project, received, in_parts) == "forwarded"
    assert tags(received) == {("run-final", "parts")}  # PartsBundleRetentionDays' lifecycle rule, not the merge's
    bucket, never = (
        in_parts.store.bucket,
        f"main-c-{run_id}",
    )  # a run one of whose bundles was never counted: its arrival dead-lettered
    _arrive(in_parts, project, never, "1", bundle(4221, ["t1::a"]), total=2)
    assert in_parts.forward_shard.forward(project, never, "1") == "forwarded"
    lost = bundle(4222, ["t2::a"])
    put(grant(in_parts, project, never, "2", lost, total=2), lost)  # in the bucket, never counted
    in_parts.close_run.close(CloseRequest(project=project, run_id=never))
    later = replace(in_parts, clock=lambda: time.time() + 3600)  # past the bundle's backstop: handed over

    def failing(*args, **kwargs):
        raise RuntimeError("the results store is down")

    later.finalize_run.barrier.arrivals.record = failing  # its arrival fails when the close hands it over too
    assert isolated.finalize_all(project, never, later) == "forwarded"
    by_shard = {
        k.split("/")[-2]: {(t["Key"], t["Value"]) for t in s3.get_object_tagging(Bucket=bucket, Key=k)["TagSet"]}
        for k in in_parts.store.listed_under(run_bundles_prefix(project, never))
    }
    assert by_shard == {"1": {("run-final", "parts")}, "2": {("run-final", "true")}}  # kept for its redrive

    _arrive(in_parts, project, skipping, "1", bundle(4211, ["t1::a"]), total=2)
    assert in_parts.forward_shard.forward(project, skipping, "1") == "forwarded"
    in_parts.close_run.close(CloseRequest(project=project, run_id=skipping, skip=["2"]))
    assert isolated.finalize_all(project, skipping, in_parts) == "forwarded"
    [(name, kept)] = in_parts.ledger.sources.kept(project, skipping).items()
    assert (name, kept.run_id) == ("2", received)
    assert in_parts.results.read(kept.shard.key).names == ["t2::a"]  # its results, beside the run that carried it
    assert (
        len(in_parts.store.listed_under(run_bundles_prefix(project, skipping))) == 1
    )  # its own bundle: no copy of 2's


def test_a_tokenless_gitlab_parts_run_hash_names_the_bytes_codspeed_received(in_parts, isolated, project):
    """A GitLab job's part goes upstream with its runPart.runId rewritten: the Run Hash its runner printed
    names bytes CodSpeed never received (0 of 3 matched). The report gives the hash of those it did."""
    import hashlib

    from codspeed_aggregator.domain.records import SentPost
    from codspeed_wire.upstream import UploadMetadata
    from tests import runner

    owner, repository = project.rsplit("/", 1)
    archive = runner.folder_archive(runner.valgrind_folder(7301, ["gl::hash"]), gzipped=True)
    meta = runner.gitlab_metadata(
        archive,
        "991001",
        "bench 1/1",
        owner=owner,
        repository=repository,
        commit=uuid.uuid4().hex + "0" * 8,
        tokenless=True,
    )
    body = runner.body_of(meta)
    accepted = in_parts.runner_upload.accept(
        UploadMetadata.model_validate_json(body), SentPost(body, "codspeed-runner")
    )
    headers = {"Content-MD5": meta["profileMd5"], "Content-Type": "application/x-tar", "Content-Encoding": "gzip"}
    assert requests.put(accepted.uploadUrl, data=archive, headers=headers, timeout=30).status_code == 200
    key = unquote(urlsplit(accepted.uploadUrl).path.split("/", 2)[2])
    assert in_parts.record_arrival.record(key) == "recorded"
    run_id = accepted.runId
    [shard] = [m["shard"] for m in isolated.finalize_requests() if m.get("shard") and m["run_id"] == run_id]
    assert in_parts.forward_shard.forward(project, run_id, shard) == "forwarded"
    [upload] = isolated.upstream.uploads(f"gitlab@{run_id}")
    received = (upload / "post-body.json").read_bytes()
    [entry] = in_parts.reports.report(project, run_id).shards
    assert entry.run_hash == hashlib.sha256(received).hexdigest() != hashlib.sha256(body).hexdigest()


def test_a_run_whose_parts_went_under_more_upstream_runs_than_its_item_lists_counts_them_and_keeps_all_in_s3(
    in_parts, isolated, project, run_id
):
    """The stand-in answers each part under a run of its own (CodSpeed's answer is unverified): the
    run item lists the first 20 and counts them all; the whole list is beside the plan."""
    from codspeed_aggregator.domain.forward_plan import MAX_RUN_IDS_LISTED
    from codspeed_aggregator.domain.keys import upstream_runs_key

    shards = [str(i) for i in range(1, MAX_RUN_IDS_LISTED + 3)]
    for shard in shards:
        _arrive(in_parts, project, run_id, shard, bundle(5000 + int(shard), [f"t{shard}::b"]), total=len(shards))
        assert in_parts.forward_shard.forward(project, run_id, shard) == "forwarded"
    assert isolated.finalize_all(project, run_id, in_parts) == "forwarded"

    report = in_parts.reports.report(project, run_id)
    everyone = {s.upstream_run_id for s in report.shards}
    listed = report.upstream.run_id.split(",")
    assert report.upstream.run_ids == len(shards) == len(everyone) and len(listed) == MAX_RUN_IDS_LISTED
    assert set(listed) < everyone
    kept = in_parts.store.read_json(upstream_runs_key(project, run_id))["run_ids"]
    assert sorted(kept) == sorted(everyone)
    from codspeed_wire.markdown import render_markdown

    assert f"(the first of {len(shards)})" in render_markdown(report)
