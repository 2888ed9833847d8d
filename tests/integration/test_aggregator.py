"""The use cases against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

import json
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest

from codspeed_aggregator.local.upstream_stub import archive_of

from codspeed_aggregator.adapters.upstream_http import UpstreamError
from codspeed_aggregator.domain.errors import Conflict, NotFound, Unprocessable
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_wire.upstream import UploadMetadata
from tests.factories import bundle, crc32_b64, marked_uncut, metadata, md5_b64, packed, put, upload_request



def _push(agg, project, run_id, shard, data, **kwargs) -> dict:
    grant = agg.uploads.grant(ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs)))
    put(grant.model_dump(), data)
    return grant.model_dump()


def _report(agg, project, run_id):
    return agg.reports.report(project, run_id)


def test_the_presigned_url_signs_md5_length_and_type_with_sigv4_and_a_short_expiry(isolated, project, run_id):
    data = bundle()
    grant = isolated.aggregator.uploads.grant(ShardUploadRequest.model_validate(upload_request(project, run_id, "1", data, total=2)))
    query = parse_qs(urlsplit(grant.upload_url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert int(query["X-Amz-Expires"][0]) <= 900
    assert set(query["X-Amz-SignedHeaders"][0].split(";")) >= {"content-md5", "content-length", "content-type", "host"}
    assert grant.key.startswith(f"bundles/{project}/{run_id}/1/")
    assert grant.headers == {"Content-MD5": md5_b64(data), "Content-Length": str(len(data)), "Content-Type": "application/gzip"}


def test_the_clients_crc32_is_signed_in_place_of_an_md5_and_the_bundle_counts(isolated, project, run_id):
    agg, data = isolated.aggregator, bundle()
    request = upload_request(project, run_id, "1", data, total=1, checksum="crc32")
    grant = agg.uploads.grant(ShardUploadRequest.model_validate(request))
    signed = set(parse_qs(urlsplit(grant.upload_url).query)["X-Amz-SignedHeaders"][0].split(";"))
    assert signed == {"x-amz-checksum-crc32", "content-length", "content-type", "host"}
    assert grant.headers == {"x-amz-checksum-crc32": crc32_b64(data), "Content-Length": str(len(data)),
                             "Content-Type": "application/gzip"}
    put(grant.model_dump(), data)
    assert agg.arrivals.record(grant.key) == "recorded"
    report = _report(agg, project, run_id)
    assert (report.arrived, report.shards[0].state) == (1, "arrived")


def test_an_arrival_is_counted_once_and_completion_asks_for_finalizing(isolated, project, run_id):
    agg = isolated.aggregator
    isolated.finalize_requests()
    first = _push(agg, project, run_id, "1", bundle(4242), total=2)
    assert agg.arrivals.record(first["key"]) == "recorded"
    assert agg.arrivals.record(first["key"]) == "duplicate"
    report = _report(agg, project, run_id)
    assert (report.arrived, report.partial, report.state) == (1, True, "open")
    assert not [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    second = _push(agg, project, run_id, "2", bundle(4242), total=2)
    assert agg.arrivals.record(second["key"]) == "recorded"
    assert agg.arrivals.record(second["key"]) == "duplicate"
    # The arrival that completed the run asks for finalizing; so does its duplicate (its first
    # delivery may have died before asking). The finalizer claims the run once either way.
    assert [m for m in isolated.finalize_requests() if m["run_id"] == run_id] == [
        {"project": project, "run_id": run_id, "reason": "complete"}
    ] * 2
    assert _report(agg, project, run_id).version > report.version


def test_a_retried_shard_replaces_its_bundle_and_counts_once(isolated, project, run_id):
    agg = isolated.aggregator
    old = _push(agg, project, run_id, "1", bundle(1, ["old::bench"]), total=2)
    new = _push(agg, project, run_id, "1", bundle(1, ["new::a", "new::b"]), total=2)
    assert agg.arrivals.record(old["key"]) == "recorded"
    assert agg.arrivals.record(new["key"]) == "recorded"
    assert agg.arrivals.record(old["key"]) == "duplicate"  # an old event late: the newer bundle stays
    shard = _report(agg, project, run_id).shards[0]
    assert (shard.state, shard.attempt, shard.benchmarks, _report(agg, project, run_id).arrived) == ("arrived", 2, 2, 1)


def test_finalizing_forwards_one_merged_upload_whatever_the_duplicates(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [_push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b"]), total=3)["key"] for i in (1, 2, 3)]
    for key in keys:
        agg.arrivals.record(key)
    with ThreadPoolExecutor(4) as pool:
        states = list(pool.map(lambda _: agg.finalizing.finalize(project, run_id), range(4)))
    assert sorted(states) == ["forwarded", "not_claimed", "not_claimed", "not_claimed"]
    uploads = isolated.upstream.uploads(run_id)
    assert len(uploads) == 1
    report = _report(agg, project, run_id)
    assert (report.state, report.partial, report.upstream.status) == ("forwarded", False, "success")


def test_close_finishes_with_what_arrived_and_names_missing_and_skipped_shards(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=3)["key"])
    answer = agg.closing.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert answer.state == "closing"
    assert agg.closing.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    report = _report(agg, project, run_id)
    assert {s.name: s.state for s in report.shards} == {"1": "arrived", "2": "missing", "3": "skipped"}
    assert agg.closing.close(CloseRequest(project=project, run_id=run_id)).message == "run is already forwarded: nothing to close"


def test_a_run_closed_with_nothing_arrived_ends_empty_and_forwards_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    _push(agg, project, run_id, "1", bundle(), total=2)  # granted, never counted
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalizing.finalize(project, run_id) == "closed_empty"
    assert _report(agg, project, run_id).state == "closed_empty" and not isolated.upstream.uploads(run_id)


def test_refusals_name_the_problem_and_change_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    before = _report(agg, project, run_id)
    with pytest.raises(Conflict, match="expects 3 shards, but the run was opened expecting 2 shards"):
        _push(agg, project, run_id, "2", bundle(), total=3)
    with pytest.raises(Conflict, match=r"commitHash is '1{40}' in this shard but '5f1c"):
        _push(agg, project, run_id, "2", bundle(), total=2, commit="1" * 40)
    with pytest.raises(Unprocessable, match="shard '7' is not in the run's manifest"):
        _push(agg, project, run_id, "7", bundle(), total=2)
    with pytest.raises(Unprocessable, match="cannot skip 9"):
        agg.closing.close(CloseRequest(project=project, run_id=run_id, skip=["9"]))
    with pytest.raises(NotFound):
        agg.closing.close(CloseRequest(project=project, run_id="no-such-run"))
    after = _report(agg, project, run_id)
    assert after.model_dump(exclude={"generated_at"}) == before.model_dump(exclude={"generated_at"})


@pytest.mark.parametrize("data, reason", [
    (b"not gzip", "neither gzip-compressed nor a tar archive"),
    (__import__("gzip").compress(b"not a tar" * 100), "gzip but not a tar archive"),
    (__import__("tests.factories", fromlist=["tar_gz"]).tar_gz({"../../etc/cron.d/x": b"x"}), "points outside the profile folder"),
    (packed(bundle())[:-700], "truncated or corrupt"),  # marked as normalized: verified, and refused alike
    (marked_uncut(__import__("gzip").compress(b"not a tar" * 100)), "gzip but not a tar archive"),
])
def test_a_bad_bundle_is_rejected_with_its_reason_and_the_run_goes_on(isolated, project, run_id, data, reason):
    agg = isolated.aggregator
    good = _push(agg, project, run_id, "1", bundle(), total=2)
    agg.arrivals.record(good["key"])
    bad = _push(agg, project, run_id, "2", data, total=2)
    assert agg.arrivals.record(bad["key"]) == "rejected"
    report = _report(agg, project, run_id)
    shards = {s.name: s for s in report.shards}
    assert shards["2"].state == "rejected" and reason in shards["2"].reason
    assert shards["1"].state == "arrived" and report.arrived == 1 and report.state == "open"
    fixed = _push(agg, project, run_id, "2", bundle(77), total=2)  # the shard pushed again, fixed
    assert agg.arrivals.record(fixed["key"]) == "recorded"
    assert {s.name: (s.state, s.reason) for s in _report(agg, project, run_id).shards}["2"] == ("arrived", None)


def test_a_push_while_closing_is_refused_and_nothing_changes(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    before = _report(agg, project, run_id)
    with pytest.raises(Conflict, match=f"run {run_id} of {project} is closing: it takes no more shards"):
        _push(agg, project, run_id, "2", bundle(), total=2)
    after = _report(agg, project, run_id)
    assert after.version == before.version and [s.state for s in after.shards] == ["arrived", "expected"]


def test_a_bundle_granted_before_the_close_and_in_after_the_forward_counts_in_the_next_attempt(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(4242, ["a::one"]), total=2)["key"])
    straggler = _push(agg, project, run_id, "2", bundle(4242, ["b::two"]), total=2)  # granted before the close
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    isolated.finalize_requests()
    for _ in range(2):  # its event, delivered twice
        assert agg.arrivals.record(straggler["key"]) in ("late", "duplicate")
    shard = {s.name: s for s in _report(agg, project, run_id).shards}["2"]
    assert shard.state == "late" and shard.reason == f"arrived after the run was finalized: counted in attempt 2 ({run_id}~2)"
    second = _report(agg, project, f"{run_id}~2")
    assert second.attempt == 2 and second.arrived == 2 and [s.state for s in second.shards] == ["arrived", "arrived"]
    assert [m["run_id"] for m in isolated.finalize_requests()] == [f"{run_id}~2"]  # complete: asked once
    assert agg.finalizing.finalize(project, f"{run_id}~2") == "forwarded"
    first_upload, second_upload = isolated.upstream.uploads(run_id)
    with tarfile.open(second_upload / "archive.tar.gz") as tar:
        text = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out"))
    assert b"Client Request: a::one\n" in text and b"Client Request: b::two\n" in text  # never a yes and a drop


def test_a_push_after_forwarding_starts_the_next_attempt_which_forwards_every_shard(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(4242), total=2)["key"])
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    again = _push(agg, project, run_id, "2", bundle(4242), total=2)  # a CI re-run of the job
    assert (again["run_id"], again["attempt"]) == (f"{run_id}~2", 2)
    assert agg.arrivals.record(again["key"]) == "recorded"
    second = _report(agg, project, f"{run_id}~2")
    assert second.attempt == 2 and second.arrived == 2 and second.partial
    assert {s.name: s.state for s in second.shards} == {"1": "arrived", "2": "arrived"}
    assert agg.finalizing.finalize(project, f"{run_id}~2") == "forwarded"
    first_upload, second_upload = isolated.upstream.uploads(run_id)  # both name the CI's run id
    with tarfile.open(second_upload / "archive.tar.gz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".out")) == ["./4242.out", "./4243.out"]
    assert _report(agg, project, run_id).state == "forwarded"  # the first attempt is left as it was


def test_many_shards_with_duplicate_events_in_threads_count_exactly_once(isolated, project, run_id):
    agg = isolated.aggregator
    isolated.finalize_requests()
    shards = 12
    keys = [_push(agg, project, run_id, str(i), bundle(1000 + i % 3), total=shards)["key"] for i in range(1, shards + 1)]
    events = keys * 3
    __import__("random").Random(7).shuffle(events)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(agg.arrivals.record, events))
    assert outcomes.count("recorded") == shards and outcomes.count("duplicate") == 2 * shards
    report = _report(agg, project, run_id)
    assert report.arrived == shards and report.version >= shards
    assert agg.ledger.reads.snapshot(project, run_id).run.arrived_count == shards
    assert len([m for m in isolated.finalize_requests() if m["run_id"] == run_id]) >= 1


def test_a_failed_forward_keeps_everything_and_a_retry_forwards_once(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=1)["key"])
    isolated.upstream.failures.extend([500, 429])  # retried with backoff: the third try gets through
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_after_the_last_try_the_run_is_forward_failed_and_keeps_its_bundles(isolated, project, run_id):
    agg = isolated.aggregator
    key = _push(agg, project, run_id, "1", bundle(), total=1)["key"]
    agg.arrivals.record(key)
    isolated.upstream.failures.extend([503, 503, 503])
    with pytest.raises(UpstreamError, match=r"answered 503: .* \(after 3 tries\)"):
        agg.finalizing.finalize(project, run_id)
    report = _report(agg, project, run_id)
    assert report.state == "forward_failed" and "after 3 tries" in report.upstream.message
    assert agg.store.s3.head_object(Bucket=agg.store.bucket, Key=key)["ContentLength"] > 0  # nothing accepted is lost
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_an_older_report_never_replaces_a_newer_one(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    current = _report(agg, project, run_id)
    stale = current.model_copy(update={"version": current.version - 1, "arrived": 0}).model_dump_json()
    agg.store.publish_report(project, run_id, current.version - 1, stale, "stale")
    assert _report(agg, project, run_id) == current
    assert not agg.store.publish_report(project, run_id, current.version, stale, "same version, second writer")
    assert _report(agg, project, run_id) == current


def test_concurrent_publishers_leave_the_newest_version(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    base = _report(agg, project, run_id)
    versions = list(range(base.version + 1, base.version + 21))
    __import__("random").Random(3).shuffle(versions)
    bodies = {v: base.model_copy(update={"version": v}).model_dump_json() for v in versions}
    start = threading.Barrier(len(versions))

    def publish(version):
        start.wait()
        agg.store.publish_report(project, run_id, version, bodies[version], "md")

    with ThreadPoolExecutor(len(versions)) as pool:
        list(pool.map(publish, versions))
    assert _report(agg, project, run_id).version == max(versions)


def test_the_sweeper_closes_runs_past_their_deadline(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    isolated.finalize_requests()
    assert (project, run_id) not in agg.closing.sweep()
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, run_id) in late.closing.sweep()
    assert {"project": project, "run_id": run_id, "reason": "deadline"} in isolated.finalize_requests()
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in _report(agg, project, run_id).shards}["2"] == "missing"
    assert (project, run_id) not in late.closing.sweep()


def test_drop_in_metadata_without_run_part_is_a_run_of_one_shard(isolated):
    data = bundle()
    meta = UploadMetadata.model_validate(metadata(md5_b64(data)))
    accepted = isolated.aggregator.uploads.accept_drop_in(meta)
    assert accepted.runId.startswith("5f1c2e3d4b5a-")
    assert "X-Amz-Signature" in accepted.uploadUrl


def test_over_the_benchmark_limit_the_run_goes_as_parts_and_a_retry_sends_only_the_rest(isolated, project, run_id, monkeypatch):
    import json

    agg = replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, max_benchmarks_per_upload=5))
    for i in (1, 2, 3):
        agg.arrivals.record(_push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b{j}" for j in range(3)]), total=3)["key"])
    original_announce = agg.upstream.announce
    calls = []

    def fail_second(metadata):
        calls.append(metadata["runPart"]["runPartId"])
        if len(calls) == 2:
            raise UpstreamError("POST answered 503: injected")
        return original_announce(metadata)

    monkeypatch.setattr(agg.upstream, "announce", fail_second)
    isolated.finalize_requests()
    assert agg.finalizing.finalize(project, run_id) == "finalizing"  # part 1 sent; parts 2 and 3 queued, to merge in parallel
    assert [(m["part"], m["reason"]) for m in isolated.finalize_requests()] == [(1, "part"), (2, "part")]
    with pytest.raises(UpstreamError, match="upload 2 of 3: POST answered 503: injected"):
        agg.finalizing.finalize(project, run_id, 1)
    assert _report(agg, project, run_id).state == "forward_failed"
    assert agg.finalizing.finalize(project, run_id, 2) == "forward_failed"  # recorded all the same; the run waits for part 2
    assert agg.finalizing.finalize(project, run_id, 1) == "forwarded"  # SQS delivers part 2's message again
    assert agg.finalizing.finalize(project, run_id, 1) == "not_claimed"  # and a duplicate delivery does nothing
    assert calls == ["aggregated-part-1-of-3", "aggregated-part-2-of-3", "aggregated-part-3-of-3", "aggregated-part-2-of-3"]
    uploads = isolated.upstream.uploads(run_id)
    assert len(uploads) == 3  # parts 1 and 3 were not sent again
    parts = sorted(json.loads((u / "metadata.json").read_text())["runPart"]["metadata"]["part"] for u in uploads)
    assert parts == [1, 2, 3]
    assert "in 3 uploads" in _report(agg, project, run_id).upstream.message
    spooled = agg.store.s3.list_objects_v2(Bucket=agg.store.bucket, Prefix=f"spool/{project}/{run_id}/")["Contents"]
    assert sorted((o["Key"].rsplit("/", 1)[1], o["Size"]) for o in spooled) == sorted(
        (f"part-{json.loads((u / 'metadata.json').read_text())['runPart']['metadata']['part'] - 1:04d}.tar.gz",
         archive_of(u).stat().st_size) for u in uploads)


def test_every_record_of_a_run_carries_the_ttl_attribute(isolated, project, run_id):
    import time

    from codspeed_aggregator.adapters.ledger.codec import load

    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.arrivals.record(_push(agg, project, run_id, "2", b"not gzip", total=2)["key"])
    items = [load(i) for i in agg.ledger.db.query(
        TableName=agg.ledger.table, KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"RUN#{project}#{run_id}"}})["Items"]]
    assert {i["sk"].split("#")[0] for i in items} == {"RUN", "SHARD", "UPLOAD", "~META", "~BENCH"}
    horizon = time.time() + agg.settings.retention_days * 86400
    assert all(horizon - 120 < i["expires_at"] <= horizon + 1 for i in items)


def _forwarded_main_run(agg, project, shards: dict[str, list[str]]) -> str:
    run_id = f"main-{__import__('uuid').uuid4().hex[:8]}"
    for name, benchmarks in shards.items():
        agg.arrivals.record(_push(agg, project, run_id, name, bundle(4242, benchmarks), total=len(shards))["key"])
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    return run_id


def test_the_latest_baseline_is_the_last_forwarded_even_within_one_second(isolated, project):
    baselines = isolated.aggregator.ledger.baselines
    for run_id, at in (("run-c", 999.5), ("run-b", 1000.25), ("run-a", 1000.75)):  # ids sort the other way
        baselines.record_baseline(project, "main", run_id, "a" * 40, at)
    assert baselines.latest_baseline(project, "main") == "run-a"
    assert baselines.latest_baseline(project, "other") is None


def test_a_skipped_shard_is_carried_from_the_latest_forwarded_run_on_the_base_branch(isolated, project, run_id):
    import io
    import json
    import tarfile

    agg = isolated.aggregator
    _forwarded_main_run(agg, project, {"1": ["old::1"], "2": ["old::2"], "3": ["old::3"]})
    baseline = _forwarded_main_run(agg, project, {"1": ["t1::a", "t1::gone"], "2": ["t2::a"], "3": ["t3::a"]})
    pr = {"ref": "refs/pull/7/merge", "baseRef": "main"}
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=3, **pr)["key"])
    agg.arrivals.record(_push(agg, project, run_id, "2", bundle(4242, ["t2::a"]), total=3, **pr)["key"])
    agg.closing.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert agg.finalizing.finalize(project, run_id) == "forwarded"

    report = _report(agg, project, run_id)
    carried = {s.name: s for s in report.shards}["3"]
    assert carried.state == "carried" and carried.source == {"run_id": baseline, "commit": report.commit}
    assert f"carried from run {baseline}" in carried.reason and carried.benchmarks == 1
    assert report.baseline["run_id"] == baseline and report.missing_benchmarks == ["t1::gone"]
    assert "Benchmarks gone since the baseline (1): t1\\:\\:gone" in __import__("codspeed_wire.report", fromlist=["x"]).render_markdown(report)

    [upload] = isolated.upstream.uploads(run_id)
    meta = json.loads((upload / "metadata.json").read_text())
    assert meta["runPart"]["metadata"]["carriedShards"] == {"3": {"runId": baseline, "commitHash": report.commit}}
    assert meta["ref"] == "refs/pull/7/merge"  # the run's own metadata, not the baseline's
    with tarfile.open(fileobj=io.BytesIO((upload / "archive.tar.gz").read_bytes())) as tar:
        text = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out"))
    assert b"Client Request: t3::a" in text and b"old::3" not in text


def test_with_no_baseline_a_skipped_shard_stays_skipped_and_says_so(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(_push(agg, project, run_id, "1", bundle(), total=2, ref="refs/pull/7/merge", baseRef="main")["key"])
    agg.closing.close(CloseRequest(project=project, run_id=run_id, skip=["2"]))
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    report = _report(agg, project, run_id)
    skipped = {s.name: s for s in report.shards}["2"]
    assert skipped.state == "skipped" and "no forwarded run on main yet" in skipped.reason
    assert report.baseline is None and report.missing_benchmarks == []


def test_metrics_count_arrivals_duplicates_and_the_forward(isolated, project, run_id):
    class Recorder:
        def __init__(self):
            self.seen = []

        def add(self, name, value, unit="Count"):
            self.seen.append((name, value, unit))

    agg = replace(isolated.aggregator, metrics=Recorder())
    key = _push(agg, project, run_id, "1", bundle(), total=1)["key"]
    agg.arrivals.record(key)
    agg.arrivals.record(key)
    agg.arrivals.record(_push(agg, project, run_id, "1", b"junk", total=1)["key"])
    agg.finalizing.finalize(project, run_id)
    names = [name for name, _, _ in agg.metrics.seen]
    assert names[:3] == ["ShardsCounted", "DuplicatesAbsorbed", "BundlesRejected"]
    assert {"ForwardSucceeded", "MergedBytes", "FinalizeLatency"} <= set(names)
    sizes = {name: (value, unit) for name, value, unit in agg.metrics.seen}
    assert sizes["MergedBytes"][0] > 0 and sizes["MergedBytes"][1] == "Bytes"
    assert 0 <= sizes["FinalizeLatency"][0] < 120 and sizes["FinalizeLatency"][1] == "Seconds"


def test_bundles_are_tagged_for_expiry_only_once_their_run_is_final(isolated, project, run_id):
    agg = isolated.aggregator
    good = _push(agg, project, run_id, "1", bundle(), total=2)["key"]
    bad = _push(agg, project, run_id, "2", b"junk", total=2)["key"]
    agg.arrivals.record(good)
    agg.arrivals.record(bad)
    tags = lambda key: agg.store.s3.get_object_tagging(Bucket=agg.store.bucket, Key=key)["TagSet"]  # noqa: E731
    isolated.upstream.failures.extend([500, 500, 500])
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    with pytest.raises(UpstreamError):
        agg.finalizing.finalize(project, run_id)
    assert tags(good) == [] and tags(bad) == []  # a failed forward keeps everything
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    assert tags(good) == tags(bad) == [{"Key": "run-final", "Value": "true"}]


def test_the_next_attempt_copies_the_earlier_shards_once_not_at_every_upload(isolated, project, run_id):
    agg = isolated.aggregator
    for shard in ("1", "2", "3"):
        agg.arrivals.record(_push(agg, project, run_id, shard, bundle(), total=3)["key"])
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    calls = []
    agg.ledger.db.meta.events.register("before-call.dynamodb.PutItem", lambda **kw: calls.append(1))
    try:
        _push(agg, project, run_id, "1", bundle(), total=3)  # opens attempt 2: copies 3 shards and their metadata
        opened = len(calls)
        calls.clear()
        for shard in ("2", "3"):
            _push(agg, project, run_id, shard, bundle(), total=3)
    finally:
        agg.ledger.db.meta.events.unregister("before-call.dynamodb.PutItem")
    assert opened >= 6 and len(calls) == 2 * 3  # later uploads: the probe of the first attempt and their own two items
    assert agg.reports.report(project, f"{run_id}~2").arrived == 3


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
