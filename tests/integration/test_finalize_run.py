"""Finalizing: one forward per part, retries, run parts, shards carried from the baseline, metrics,
expiry. Against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

import json
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from codspeed_aggregator.adapters.upstream_http import UpstreamError
from codspeed_aggregator.domain.keys import part_plan_key, spool_key
from codspeed_aggregator.domain.upstream_parts import merged_part_id
from codspeed_local.upstream_stub import archive_of, benchmarks_in
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from tests.factories import bundle, push, put, upload_request


@pytest.mark.slow
def test_finalizing_forwards_one_merged_upload_whatever_the_duplicates(isolated, project, run_id):
    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b"]), total=3)["key"] for i in (1, 2, 3)]
    for key in keys:
        agg.record_arrival.record(key)
    with ThreadPoolExecutor(4) as pool:
        states = list(pool.map(lambda _: agg.finalize_run.finalize(project, run_id), range(4)))
    assert sorted(states) == ["forwarded", "not_claimed", "not_claimed", "not_claimed"]
    uploads = isolated.upstream.uploads(run_id)
    assert len(uploads) == 1
    report = agg.reports.report(project, run_id)
    assert (report.state, report.partial, report.upstream.status) == ("forwarded", False, "success")


def test_a_failed_forward_keeps_everything_and_a_retry_forwards_once(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=1)["key"])
    isolated.upstream.failures.extend([500, 429])  # retried with backoff: the third try gets through
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_after_the_last_try_the_run_is_forward_failed_and_keeps_its_bundles(isolated, project, run_id):
    agg = isolated.aggregator
    key = push(agg, project, run_id, "1", bundle(), total=1)["key"]
    agg.record_arrival.record(key)
    isolated.upstream.failures.extend([503, 503, 503])
    with pytest.raises(UpstreamError, match=r"answered 503: .* \(after 3 tries\)"):
        agg.finalize_run.finalize(project, run_id)
    report = agg.reports.report(project, run_id)
    assert report.state == "forward_failed" and "after 3 tries" in report.upstream.message
    assert agg.store.s3.head_object(Bucket=agg.store.bucket, Key=key)["ContentLength"] > 0  # nothing accepted is lost
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_over_the_benchmark_limit_the_run_goes_as_parts_and_a_retry_sends_only_the_rest(
    isolated, project, run_id, monkeypatch
):

    agg = replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, max_benchmarks_per_upload=5))
    for i in (1, 2, 3):
        agg.record_arrival.record(
            push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b{j}" for j in range(3)]), total=3)["key"]
        )
    original_announce = agg.upstream.announce
    calls = []

    def fail_second(metadata):
        calls.append(metadata["runPart"]["runPartId"])
        if len(calls) == 2:
            raise UpstreamError("POST answered 503: injected")
        return original_announce(metadata)

    monkeypatch.setattr(agg.upstream, "announce", fail_second)
    isolated.finalize_requests()
    # planned: the 3 parts queued, to merge in parallel
    assert agg.finalize_run.finalize(project, run_id) == "finalizing"
    assert [(m["part"], m["reason"]) for m in isolated.finalize_requests()] == [(0, "part"), (1, "part"), (2, "part")]
    assert agg.finalize_run.finalize(project, run_id, 0) == "finalizing"
    with pytest.raises(UpstreamError, match="upload 2 of 3: POST answered 503: injected"):
        agg.finalize_run.finalize(project, run_id, 1)
    assert agg.reports.report(project, run_id).state == "forward_failed"
    assert agg.finalize_run.finalize(project, run_id) == "not_claimed"  # a part's lease holds the run: no re-plan
    # recorded all the same; the run waits for part 2
    assert agg.finalize_run.finalize(project, run_id, 2) == "forward_failed"
    assert agg.finalize_run.finalize(project, run_id, 1) == "forwarded"  # SQS delivers part 2's message again
    assert agg.finalize_run.finalize(project, run_id, 1) == "not_claimed"  # and a duplicate delivery does nothing
    assert calls == [merged_part_id("", 1), merged_part_id("", 2), merged_part_id("", 3), merged_part_id("", 2)]
    uploads = isolated.upstream.uploads(run_id)
    assert len(uploads) == 3  # parts 1 and 3 were not sent again
    parts = sorted(json.loads((u / "metadata.json").read_text())["runPart"]["metadata"]["part"] for u in uploads)
    assert parts == [1, 2, 3]
    assert "in 3 uploads" in agg.reports.report(project, run_id).upstream.message
    spooled = agg.store.s3.list_objects_v2(
        Bucket=agg.store.bucket, Prefix=spool_key(project, run_id, 0).rsplit("/", 1)[0] + "/"
    )["Contents"]
    assert sorted((o["Key"].rsplit("/", 1)[1], o["Size"]) for o in spooled) == sorted(
        (
            f"part-{json.loads((u / 'metadata.json').read_text())['runPart']['metadata']['part'] - 1:04d}.tar.gz",
            archive_of(u).stat().st_size,
        )
        for u in uploads
    )


@pytest.mark.slow
def test_each_part_reads_its_own_slice_of_the_plan_and_only_the_last_reads_it_whole(isolated, project, run_id):
    agg = replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, max_benchmarks_per_upload=5))
    for i in (1, 2, 3):
        agg.record_arrival.record(
            push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b{j}" for j in range(3)]), total=3)["key"]
        )
    isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "finalizing"
    read = []
    s3 = agg.finalize_run.store.s3
    s3.meta.events.register(
        "before-parameter-build.s3.GetObject",
        lambda params, **_: read.append(params["Key"].rsplit("/", 1)[1]),
        unique_id="plan-reads",
    )
    try:
        states = [agg.finalize_run.finalize(project, run_id, part) for part in (0, 1, 2)]
    finally:
        s3.meta.events.unregister("before-parameter-build.s3.GetObject", unique_id="plan-reads")
    assert states == ["finalizing", "finalizing", "forwarded"]
    plan_reads = [key for key in read if key.endswith(".json") and not key.endswith("index.json")]
    assert plan_reads == ["part-000000.json", "part-000001.json", "part-000002.json", "plan.json"]
    recorded = agg.ledger.reads.snapshot(project, run_id).run.forward.plan
    slice_ = agg.store.read_json(part_plan_key(project, run_id, recorded.parts_at, 1))
    assert list(slice_["shards"]) == slice_["upload"]["shards"] and len(slice_["shards"]) == 1
    assert len(isolated.upstream.uploads(run_id)) == 3


@pytest.mark.slow
def test_a_push_after_forwarding_starts_the_next_attempt_which_forwards_only_what_the_upstream_lacks(
    isolated, project, run_id
):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=2)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    again = push(agg, project, run_id, "2", bundle(4242, ["t2::a"]), total=2)  # the job that came late
    assert (again["run_id"], again["attempt"]) == (f"{run_id}~2", 2)
    assert agg.record_arrival.record(again["key"]) == "recorded"
    second = agg.reports.report(project, f"{run_id}~2")
    assert second.attempt == 2 and second.arrived == 2 and second.partial
    assert {s.name: s.state for s in second.shards} == {"1": "arrived", "2": "arrived"}
    assert agg.reports.report(project, run_id).run_id == f"{run_id}~2"  # a run's report is its latest attempt's
    assert agg.finalize_run.finalize(project, f"{run_id}~2") == "forwarded"
    first_upload, second_upload = isolated.upstream.uploads(run_id)  # both name the CI's run id
    assert [
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in (first_upload, second_upload)
    ] == [
        pushed_part_id("1", "valgrind"),
        pushed_part_id("2", "valgrind"),
    ]  # each shard once: the upstream held shard 1
    assert "1 part the upstream holds already" in agg.reports.report(project, f"{run_id}~2").upstream.message
    assert agg.reports.report(project, f"{run_id}~1").state == "forwarded"  # the first attempt is left as it was
    assert isolated.upstream.benchmarks_twice() == {}


def _forwarded_main_run(agg, project, shards: dict[str, list[str]]) -> str:
    run_id = f"main-{__import__('uuid').uuid4().hex[:8]}"
    for name, benchmarks in shards.items():
        agg.record_arrival.record(push(agg, project, run_id, name, bundle(4242, benchmarks), total=len(shards))["key"])
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    return run_id


@pytest.mark.slow
def test_a_skipped_shard_is_carried_from_the_latest_forwarded_run_on_the_base_branch(isolated, project, run_id):
    import io

    agg = isolated.aggregator
    _forwarded_main_run(agg, project, {"1": ["old::1"], "2": ["old::2"], "3": ["old::3"]})
    baseline = _forwarded_main_run(agg, project, {"1": ["t1::a", "t1::gone"], "2": ["t2::a"], "3": ["t3::a"]})
    pr = {"ref": "refs/pull/7/merge", "baseRef": "main"}
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=3, **pr)["key"])
    agg.record_arrival.record(push(agg, project, run_id, "2", bundle(4242, ["t2::a"]), total=3, **pr)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"

    report = agg.reports.report(project, run_id)
    carried = {s.name: s for s in report.shards}["3"]
    assert carried.state == "carried" and carried.source == {"run_id": baseline, "commit": report.commit}
    assert f"carried from run {baseline}" in carried.reason and carried.benchmarks == 1
    assert report.baseline["run_id"] == baseline and report.missing_benchmarks == ["t1::gone"]
    assert "Benchmarks gone since the baseline (1): t1\\:\\:gone" in __import__(
        "codspeed_wire.markdown", fromlist=["x"]
    ).render_markdown(report)

    [upload] = isolated.upstream.uploads(run_id)
    meta = json.loads((upload / "metadata.json").read_text())
    assert meta["runPart"]["metadata"]["carriedShards"] == {"3": {"runId": baseline, "commitHash": report.commit}}
    assert meta["ref"] == "refs/pull/7/merge"  # the run's own metadata, not the baseline's
    with tarfile.open(fileobj=io.BytesIO((upload / "archive.tar.gz").read_bytes())) as tar:
        text = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out"))
    assert b"Client Request: t3::a" in text and b"old::3" not in text


def _main_skips_shard_3_after_receiving_it(agg, project, run_id) -> tuple[str, str]:
    """Main's run that received shard 3, then main's next run that skipped it; a pull request
    (``run_id``) skipping it too, closed. Answers the two main runs."""
    received = _forwarded_main_run(agg, project, {"1": ["t1::a"], "2": ["t2::a"], "3": ["t3::received"]})
    skipped_on_main = f"main-skips-{run_id}"
    for name in ("1", "2"):
        agg.record_arrival.record(
            push(agg, project, skipped_on_main, name, bundle(4242, [f"t{name}::a"]), total=3)["key"]
        )
    agg.close_run.close(CloseRequest(project=project, run_id=skipped_on_main, skip=["3"]))
    assert agg.finalize_run.finalize(project, skipped_on_main) == "forwarded"
    pr = {"ref": "refs/pull/7/merge", "baseRef": "main"}
    for name in ("1", "2"):
        agg.record_arrival.record(push(agg, project, run_id, name, bundle(4242, [f"t{name}::a"]), total=3, **pr)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    return received, skipped_on_main


def _forwarded_text(isolated, run_id) -> tuple[dict, bytes]:
    """The one upload of a run the upstream holds: its metadata, and its profiles' text."""
    import io

    [upload] = isolated.upstream.uploads(run_id)
    with tarfile.open(fileobj=io.BytesIO((upload / "archive.tar.gz").read_bytes())) as tar:
        text = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out"))
    return json.loads((upload / "metadata.json").read_text()), text


@pytest.mark.slow
def test_a_shard_skipped_on_main_twice_in_a_row_is_carried_from_the_run_that_last_received_it(
    isolated, project, run_id
):
    agg = isolated.aggregator
    received, skipped_on_main = _main_skips_shard_3_after_receiving_it(agg, project, run_id)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"

    report, received_commit = agg.reports.report(project, run_id), agg.reports.report(project, received).commit
    carried = {s.name: s for s in report.shards}["3"]
    # compared with main's latest run, its shard 3 from where it ran
    assert report.baseline["run_id"] == skipped_on_main
    assert carried.state == "carried" and carried.source == {"run_id": received, "commit": received_commit}
    assert f"carried from run {received}" in carried.reason
    meta, text = _forwarded_text(isolated, run_id)
    assert meta["runPart"]["metadata"]["carriedShards"] == {"3": {"runId": received, "commitHash": received_commit}}
    assert b"Client Request: t3::received" in text


@pytest.mark.slow
def test_a_shard_last_received_past_the_retention_is_not_carried_and_the_report_says_so(isolated, project, run_id):
    import time

    agg = isolated.aggregator
    _, skipped_on_main = _main_skips_shard_3_after_receiving_it(agg, project, run_id)
    later = time.time() + agg.settings.retention_days * 86400  # the bucket is about to delete that bundle
    finalizing = agg.finalize_run
    later_finalizer = replace(finalizing, clock=lambda: later, planner=replace(finalizing.planner, clock=lambda: later))
    assert later_finalizer.finalize(project, run_id) == "forwarded"

    skipped = {s.name: s for s in agg.reports.report(project, run_id).shards}["3"]
    assert skipped.state == "skipped"
    assert (
        skipped.reason
        == f"skipped, not carried: no run of main up to baseline run {skipped_on_main} still keeps results of it"
    )
    meta, text = _forwarded_text(isolated, run_id)
    assert "carriedShards" not in meta["runPart"]["metadata"] and b"t3::received" not in text


def _expire_run(isolated, project: str, run_id: str) -> int:
    """What the bucket's lifecycle does once a run's retention has passed: every version of its
    bundles, normalized copies and results deleted. Answers how many objects went."""
    from codspeed_aggregator.adapters.aws import client
    from codspeed_aggregator.domain.keys import project_segment

    s3, bucket, gone = client("s3"), isolated.resources.bucket, 0
    for prefix in ("bundles", "normalized", "results"):
        listed = s3.list_object_versions(Bucket=bucket, Prefix=f"{prefix}/{project_segment(project)}/{run_id}/")
        for version in listed.get("Versions", []):
            s3.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
            gone += 1
    return gone


@pytest.mark.slow
def test_a_shard_main_carried_is_kept_beside_that_run_and_carried_from_there_once_the_run_it_ran_in_expired(
    isolated, project, run_id
):
    from codspeed_aggregator.domain.keys import run_bundles_prefix

    agg = isolated.aggregator
    received, skipped_on_main = _main_skips_shard_3_after_receiving_it(agg, project, run_id)
    [(name, kept)] = agg.ledger.sources.kept(project, skipped_on_main).items()
    assert (name, kept.run_id) == ("3", received) and kept.shard.key.startswith(
        run_bundles_prefix(project, skipped_on_main)
    )
    assert _expire_run(isolated, project, received) >= 4  # its 3 bundles, their results (and normalized copies)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"

    report, received_commit = agg.reports.report(project, run_id), agg.reports.report(project, received).commit
    carried = {s.name: s for s in report.shards}["3"]
    assert carried.state == "carried" and carried.source == {"run_id": received, "commit": received_commit}
    meta, text = _forwarded_text(isolated, run_id)
    assert meta["runPart"]["metadata"]["carriedShards"] == {"3": {"runId": received, "commitHash": received_commit}}
    assert b"Client Request: t3::received" in text
    assert [b.name for b in agg.reports.shard_benchmarks(project, run_id, "3").benchmarks] == ["t3::received"]


@pytest.mark.slow
def test_a_carried_shard_that_cannot_be_kept_never_keeps_its_run_from_being_main_s_baseline(
    isolated, project, run_id, monkeypatch, caplog
):
    agg = isolated.aggregator
    _forwarded_main_run(agg, project, {"1": ["t1::a"], "2": ["t2::a"], "3": ["t3::received"]})
    skipping = f"main-skips-{run_id}"
    for name in ("1", "2"):
        agg.record_arrival.record(push(agg, project, skipping, name, bundle(4242, [f"t{name}::a"]), total=3)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=skipping, skip=["3"]))

    def unexpected(*args, **kwargs):
        raise ValueError("not JSON")  # whatever goes wrong copying the carried shard's results

    monkeypatch.setattr(agg.results, "copy", unexpected)
    assert agg.finalize_run.finalize(project, skipping) == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") == skipping  # recorded, not lost to the keep
    assert agg.ledger.sources.kept(project, skipping) == {}
    assert f"shard 3 carried by {project} run {skipping} is not kept beside it: ValueError: not JSON" in caplog.text


def test_a_run_whose_ref_names_no_branch_is_recorded_on_no_branch(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=1, ref="refs/heads/")["key"])
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "") is None  # "refs/heads/" names no branch
    forwarded = agg.ledger.db.query(
        TableName=agg.ledger.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"FORWARDED#{project}#"}},
    )
    assert forwarded["Items"] == []


@pytest.mark.slow
def test_a_pull_requests_run_keeps_no_copy_of_what_it_carried(isolated, project, run_id):
    agg = isolated.aggregator
    _main_skips_shard_3_after_receiving_it(agg, project, run_id)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert agg.ledger.sources.kept(project, run_id) == {}  # no baseline: nothing will carry from it


def test_with_no_baseline_a_skipped_shard_stays_skipped_and_says_so(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(
        push(agg, project, run_id, "1", bundle(), total=2, ref="refs/pull/7/merge", baseRef="main")["key"]
    )
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["2"]))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
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
    key = push(agg, project, run_id, "1", bundle(), total=1)["key"]
    agg.record_arrival.record(key)
    agg.record_arrival.record(key)
    agg.record_arrival.record(push(agg, project, run_id, "1", b"junk", total=1)["key"])
    agg.finalize_run.finalize(project, run_id)
    names = [name for name, _, _ in agg.metrics.seen]
    assert names[:3] == ["ShardsCounted", "DuplicatesAbsorbed", "BundlesRejected"]
    assert {"ForwardSucceeded", "MergedBytes", "FinalizeLatency"} <= set(names)
    sizes = {name: (value, unit) for name, value, unit in agg.metrics.seen}
    assert sizes["MergedBytes"][0] > 0 and sizes["MergedBytes"][1] == "Bytes"
    assert 0 <= sizes["FinalizeLatency"][0] < 120 and sizes["FinalizeLatency"][1] == "Seconds"


def test_bundles_are_tagged_for_expiry_only_once_their_run_is_final(isolated, project, run_id):
    agg = isolated.aggregator
    good = push(agg, project, run_id, "1", bundle(), total=2)["key"]
    bad = push(agg, project, run_id, "2", b"junk", total=2)["key"]
    agg.record_arrival.record(good)
    agg.record_arrival.record(bad)

    def tags(key):
        return agg.store.s3.get_object_tagging(Bucket=agg.store.bucket, Key=key)["TagSet"]

    isolated.upstream.failures.extend([500, 500, 500])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    with pytest.raises(UpstreamError):
        agg.finalize_run.finalize(project, run_id)
    assert tags(good) == [] and tags(bad) == []  # a failed forward keeps everything
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert tags(good) == tags(bad) == [{"Key": "run-final", "Value": "true"}]


@pytest.mark.slow
def test_a_part_is_never_forwarded_twice_whatever_retry_arrives_while_its_finalizer_merges(
    isolated, project, run_id, monkeypatch
):
    agg = replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, max_benchmarks_per_upload=5))
    for i in (1, 2, 3):
        agg.record_arrival.record(
            push(agg, project, run_id, str(i), bundle(4242, [f"t{i}::b{j}" for j in range(3)]), total=3)["key"]
        )
    isolated.finalize_requests()
    original, raced = agg.upstream.announce, []

    def announce(metadata):
        part = metadata["runPart"]["runPartId"]
        if part == merged_part_id("", 3):
            raise UpstreamError("POST answered 503: injected")  # the run is forward_failed while part 2 merges
        if part == merged_part_id("", 2) and not raced:
            # and a second delivery of part 2's
            raced.append(
                [
                    agg.finalize_run.finalize(project, run_id),  # the first message's retry, a minute later
                    agg.finalize_run.finalize(project, run_id, 1),
                ]
            )
        return original(metadata)

    monkeypatch.setattr(agg.upstream, "announce", announce)
    agg.finalize_run.finalize(project, run_id)
    assert agg.finalize_run.finalize(project, run_id, 0) == "finalizing"
    with pytest.raises(UpstreamError):
        agg.finalize_run.finalize(project, run_id, 2)
    assert agg.finalize_run.finalize(project, run_id, 1) == "forward_failed"  # part 2 sent, while the retries raced it
    assert raced == [["not_claimed", "not_claimed"]]
    monkeypatch.setattr(agg.upstream, "announce", original)
    assert agg.finalize_run.finalize(project, run_id, 2) == "forwarded"  # SQS delivers part 3's message again
    parts = [
        json.loads((u / "metadata.json").read_text())["runPart"]["metadata"]["part"]
        for u in isolated.upstream.uploads(run_id)
    ]
    assert sorted(parts) == [1, 2, 3]  # each part once


def test_a_run_every_part_of_which_reached_the_upstream_ends_forwarded_when_a_ledger_write_is_throttled(
    isolated, project, run_id
):
    from botocore.awsrequest import AWSResponse

    class Recorder:
        def __init__(self):
            self.seen = []

        def add(self, name, value, unit="Count"):
            self.seen.append(name)

    metrics = Recorder()
    agg = replace(isolated.aggregator, metrics=metrics)
    for i in (1, 2):
        agg.record_arrival.record(push(agg, project, run_id, str(i), bundle(4242 + i), total=2)["key"])
    throttled = []

    def note(params, context, **_):
        values = params.get("ExpressionAttributeValues") or {}
        context["throttle"] = values.get(":s") == {"S": "forwarded"} and not throttled

    def throttle(context, **_):
        if context.get("throttle"):
            throttled.append(1)
            return AWSResponse("https://dynamodb.us-east-1.amazonaws.com", 400, {}, None), {
                "Error": {"Code": "ThrottlingException", "Message": "Rate of requests exceeds the allowed throughput."},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }

    events = agg.ledger.db.meta.events
    events.register("before-parameter-build.dynamodb.UpdateItem", note, unique_id="throttle-note")
    events.register_first("before-call.dynamodb.UpdateItem", throttle, unique_id="throttle")
    try:
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    finally:
        events.unregister("before-parameter-build.dynamodb.UpdateItem", unique_id="throttle-note")
        events.unregister("before-call.dynamodb.UpdateItem", unique_id="throttle")
    assert throttled == [1] and "ForwardFailed" not in metrics.seen and "ForwardSucceeded" in metrics.seen
    assert agg.reports.report(project, run_id).state == "forwarded" and len(isolated.upstream.uploads(run_id)) == 1


@pytest.mark.slow
def test_over_three_attempts_each_benchmark_stands_in_one_part_upstream(isolated, project, run_id):
    """Attempt 1 merges shards 1 and 2; attempt 2 re-runs 2 and brings 3 (the group's next part);
    attempt 3 re-runs 1. The
    upstream (as CodSpeed combines it: the last upload of each runPartId) holds each shard's
    latest benchmark, once."""
    agg = isolated.aggregator

    def attempt(pushes: dict[str, str]) -> str:
        for shard, benchmark in pushes.items():
            grant = push(agg, project, run_id, shard, bundle(4242, [benchmark]), total=4)
            agg.record_arrival.record(grant["key"])
        agg.close_run.close(CloseRequest(project=project, run_id=run_id))
        assert isolated.finalize_all(project, grant["run_id"]) == "forwarded"
        return grant["run_id"]

    attempt({"1": "t1::a", "2": "t2::a"})
    assert attempt({"2": "t2::b", "3": "t3::a"}) == f"{run_id}~2"
    assert attempt({"1": "t1::b"}) == f"{run_id}~3"
    [parts] = [p for (_, run), p in isolated.upstream.combined(project).items() if run == run_id]
    held = {part: sorted(benchmarks_in(archive_of(upload))) for part, upload in parts.items()}
    assert held == {merged_part_id("", 1): ["t1::b", "t2::b"], merged_part_id("", 2): ["t3::a"]}
    assert isolated.upstream.benchmarks_twice(project) == {}
    assert len(isolated.upstream.uploads(run_id)) == 4  # part 1 in each attempt (replacing itself), part 2 once


def _pushed_in(agg, project, run_id, shard, benchmark, ci_attempt) -> dict:
    """A shard pushed by the client in the CI's attempt ``ci_attempt`` (GITHUB_RUN_ATTEMPT)."""
    data = bundle(4242, [benchmark])
    request = {**upload_request(project, run_id, shard, data, total=3), "ci_attempt": ci_attempt}
    grant = agg.request_upload.grant(ShardUploadRequest.model_validate(request)).model_dump()
    put(grant, data)
    return grant


def _held(isolated, project, run_id) -> set[str]:
    [parts] = [p for (owner, run), p in isolated.upstream.combined(project).items() if run == run_id]
    return {b for upload in parts.values() for b in benchmarks_in(archive_of(upload))}


@pytest.mark.slow
def test_re_running_all_jobs_is_one_attempt_forwarded_once(isolated, project, run_id):
    """ "Re-run all jobs" made one attempt and one forward per shard: the first re-run shard opened
    ~2 (complete at once with the others inherited) and went upstream, the next opened ~3."""
    agg = isolated.aggregator
    for shard in "123":
        agg.record_arrival.record(_pushed_in(agg, project, run_id, shard, f"t{shard}::first", 1)["key"])
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    again = [_pushed_in(agg, project, run_id, shard, f"t{shard}::again", 2) for shard in "123"]
    assert {g["run_id"] for g in again} == {f"{run_id}~2"}  # one attempt for the CI's attempt 2
    for grant in again[:2]:
        assert agg.record_arrival.record(grant["key"]) == "recorded"
        assert _own(isolated, run_id) == []  # shard 3 still re-runs: nothing goes upstream yet
    agg.record_arrival.record(again[2]["key"])
    assert [m["run_id"] for m in _own(isolated, run_id)] == [f"{run_id}~2"]
    assert agg.finalize_run.finalize(project, f"{run_id}~2") == "forwarded"
    assert agg.ledger.runs.run_record(project, f"{run_id}~3") is None
    assert len(isolated.upstream.uploads(run_id)) == 2  # attempt 1's part, then the re-run's, once
    assert _held(isolated, project, run_id) == {"t1::again", "t2::again", "t3::again"}


def _own(isolated, run_id: str) -> list[dict]:
    """The finalize messages of this run's attempts (not another test's, left on the worker's queue)."""
    return [m for m in isolated.finalize_requests() if m["run_id"].split("~")[0] == run_id]


@pytest.mark.slow
def test_re_running_failed_jobs_waits_for_the_ci_attempts_close_and_carries_the_shards_not_re_run(
    isolated, project, run_id
):
    agg = isolated.aggregator
    for shard in "123":
        agg.record_arrival.record(_pushed_in(agg, project, run_id, shard, f"t{shard}::first", 1)["key"])
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    failed = _pushed_in(agg, project, run_id, "2", "t2::again", 2)  # "re-run failed jobs": shard 2 alone
    assert agg.record_arrival.record(failed["key"]) == "recorded"
    assert _own(isolated, run_id) == []  # the run cannot tell which jobs re-run: its close says
    assert agg.reports.report(project, run_id).state == "open"
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))  # the re-run's close job (or the webhook)
    assert isolated.finalize_all(project, f"{run_id}~2", agg) == "forwarded"
    assert _held(isolated, project, run_id) == {"t1::first", "t2::again", "t3::first"}
    assert isolated.upstream.benchmarks_twice(project) == {}


@pytest.mark.slow
def test_an_upload_that_names_no_ci_attempt_opens_one_next_attempt_its_inherited_shards_never_complete(
    isolated, project, run_id
):
    """Before, the shards it inherited completed it at once: each re-run job of a static token's matrix
    opened an attempt of its own. Now its close (the webhook, the gate, the deadline) ends it."""
    agg = isolated.aggregator
    for shard in "123":
        agg.record_arrival.record(push(agg, project, run_id, shard, bundle(4242, [f"t{shard}::a"]), total=3)["key"])
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    late = push(agg, project, run_id, "2", bundle(4242, ["t2::b"]), total=3)
    assert agg.record_arrival.record(late["key"]) == "recorded"
    assert [m for m in _own(isolated, run_id) if m.get("reason") == "complete"] == []
    again = push(agg, project, run_id, "3", bundle(4242, ["t3::b"]), total=3)  # the re-run's next job joins it
    assert again["run_id"] == late["run_id"] == f"{run_id}~2"
    assert agg.record_arrival.record(again["key"]) == "recorded"
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert isolated.finalize_all(project, f"{run_id}~2", agg) == "forwarded"
