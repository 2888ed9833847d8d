"""The finalizer splices the normalized copies arrivals made, and merges the bundles when a
copy does not match its index."""

import base64
import hashlib
import json
import tarfile
from dataclasses import replace
from unittest import mock

import pytest
from botocore.exceptions import ClientError

from codspeed_aggregator.domain.keys import index_key, normalized_key
from codspeed_aggregator.use_cases import forward_part
from codspeed_local.upstream_stub import archive_of
from codspeed_rules.index import Index, MadeFrom
from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, marked_uncut, packed, put, upload_request


def _run(agg, isolated, project, run_id, shards=3, make=lambda data: data) -> list[str]:
    keys = []
    for i in range(1, shards + 1):
        data = make(bundle(4242, [f"t{i}::a", f"t{i}::b"]))
        grant = agg.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request(project, run_id, str(i), data, total=shards))
        )
        put(grant.model_dump(), data)
        assert agg.record_arrival.record(grant.key) == "recorded"
        keys.append(grant.key)
    isolated.finalize_requests()
    return keys


def _outs(upload) -> dict[str, bytes]:
    with tarfile.open(archive_of(upload)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith(".out")}


def _spliced(agg, isolated, project, run_id):
    """Finalize a run of three shards of pid 4242: spliced, never merged; its upload and callgrind files."""
    with (
        mock.patch.object(forward_part, "splice", wraps=forward_part.splice) as spliced,
        mock.patch.object(forward_part, "merge_bundles") as merged,
    ):
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert spliced.call_count == 1 and merged.call_count == 0
    [upload] = isolated.upstream.uploads(run_id)
    outs = _outs(upload)
    assert sorted(outs) == ["./4242.out", "./4243.out", "./4244.out"]
    assert all(f"\npid: {name[2:6]}\n".encode() in body for name, body in outs.items())
    return upload, outs


def test_arrivals_leave_a_normalized_copy_and_the_finalizer_splices_it(isolated, project, run_id):
    agg = isolated.aggregator
    keys = _run(agg, isolated, project, run_id)
    shard = agg.ledger.reads.snapshot(project, run_id).shards["1"]
    assert shard.normalized.key == normalized_key(keys[0]) and shard.normalized.index_version
    index = Index.from_json(agg.store.read_json(index_key(keys[0]), shard.normalized.index_version))
    assert index.bundle == MadeFrom(keys[0], shard.version_id)
    assert index.inflated_alone  # the arrival inflated each segment it wrote: no forward does again
    upload, _ = _spliced(agg, isolated, project, run_id)
    metadata = json.loads((upload / "metadata.json").read_text())
    assert metadata["profileMd5"] == base64.b64encode(hashlib.md5(archive_of(upload).read_bytes()).digest()).decode()


def _another_object(document):
    document["object"]["crc32"] ^= 1


def _another_format(document):
    document["format"] = 2


@pytest.mark.parametrize("alter", [_another_object, _another_format])
def test_a_normalized_copy_that_does_not_match_its_index_is_merged_from_the_bundles_instead(
    isolated, project, run_id, alter
):
    agg = isolated.aggregator
    keys = _run(agg, isolated, project, run_id)
    # the copy changed under its index (a new version at the key is never read: the recorded one is
    # pinned; here the recorded version's index itself names another object), or the index is of
    # a format this release does not read
    original = agg.store.read_json

    def read_json(key, version_id=None):
        document = original(key, version_id)
        if key == index_key(keys[1]):
            alter(document)
        return document

    with (
        mock.patch.object(agg.store, "read_json", read_json),
        mock.patch.object(forward_part, "merge_bundles", wraps=forward_part.merge_bundles) as merged,
    ):
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert merged.call_count == 1
    [upload] = isolated.upstream.uploads(run_id)
    assert sorted(_outs(upload)) == ["./4242.out", "./4243.out", "./4244.out"]


def test_an_index_made_from_another_bundle_is_refused(isolated, project, run_id):
    agg = isolated.aggregator
    keys = _run(agg, isolated, project, run_id, shards=2)
    shard = agg.ledger.reads.snapshot(project, run_id).shards["2"]
    other = agg.store.read_json(index_key(keys[0]))  # shard 1's index, offered for shard 2
    read_json = agg.store.read_json

    def offered(key, version=None):
        return other if key == index_key(keys[1]) else read_json(key, version)

    with (
        mock.patch.object(agg.store, "read_json", side_effect=offered),
        mock.patch.object(forward_part, "merge_bundles", wraps=forward_part.merge_bundles) as merged,
    ):
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert merged.call_count == 1 and shard.normalized is not None
    assert agg.store.s3.head_object(Bucket=agg.store.bucket, Key=normalized_key(keys[1]))["ContentLength"] > 0


def test_a_normalized_copy_gone_from_the_bucket_is_merged_from_the_bundle(isolated, project, run_id):
    agg = isolated.aggregator
    keys = _run(agg, isolated, project, run_id, shards=2)
    shard = agg.ledger.reads.snapshot(project, run_id).shards["1"]
    agg.store.s3.delete_object(Bucket=agg.store.bucket, Key=normalized_key(keys[0]), VersionId=shard.normalized.version)
    with mock.patch.object(forward_part, "merge_bundles", wraps=forward_part.merge_bundles) as merged:
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert merged.call_count == 1
    [upload] = isolated.upstream.uploads(run_id)
    assert sorted(_outs(upload)) == ["./4242.out", "./4243.out"]


def _has(agg, key: str) -> bool:
    try:
        agg.store.s3.head_object(Bucket=agg.store.bucket, Key=key)
    except ClientError:
        return False
    return True


def test_a_bundle_the_client_normalized_is_verified_and_spliced_as_it_is(isolated, project, run_id):
    agg = isolated.aggregator
    with mock.patch.object(agg.store, "spool", wraps=agg.store.spool) as spooled:
        keys = _run(agg, isolated, project, run_id, make=packed)
    assert spooled.call_count == 3 and not any(_has(agg, normalized_key(key)) for key in keys)  # no copy written
    shard = agg.ledger.reads.snapshot(project, run_id).shards["2"]
    assert shard.normalized.key == keys[1] and shard.normalized.version == shard.version_id
    index = Index.from_json(agg.store.read_json(index_key(keys[1]), shard.normalized.index_version))
    assert index.bundle == MadeFrom(keys[1], shard.version_id)
    assert index.inflated_alone  # verified: each segment was inflated alone
    _, outs = _spliced(agg, isolated, project, run_id)
    assert b"t2::a" in outs["./4243.out"] and b"t3::b" in outs["./4244.out"]


class _Recorder:
    def __init__(self):
        self.seen = []

    def add(self, name, value, unit="Count"):
        self.seen.append(name)


def test_a_bundle_marked_as_normalized_but_not_cut_is_read_again_and_normalized(isolated, project, run_id):
    agg = replace(isolated.aggregator, metrics=_Recorder())
    keys = _run(agg, isolated, project, run_id, shards=2, make=marked_uncut)
    assert agg.metrics.seen.count("NormalizedBundlesRedone") == 2 and agg.metrics.seen.count("ShardsCounted") == 2
    shard = agg.ledger.reads.snapshot(project, run_id).shards["1"]
    assert shard.state == "arrived" and shard.normalized.key == normalized_key(keys[0])
    with mock.patch.object(forward_part, "merge_bundles") as merged:
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert merged.call_count == 0
    [upload] = isolated.upstream.uploads(run_id)
    assert sorted(_outs(upload)) == ["./4242.out", "./4243.out"]


@pytest.mark.parametrize("make", [packed, marked_uncut])
def test_a_marked_bundle_gives_the_results_a_plain_one_gives(isolated, project, run_id, make):
    agg = isolated.aggregator
    _run(agg, isolated, project, run_id, shards=1, make=make)
    plain_run = run_id + "-plain"
    _run(agg, isolated, project, plain_run, shards=1)
    marked, plain = (
        agg.ledger.reads.snapshot(project, run_id).shards["1"],
        agg.ledger.reads.snapshot(project, plain_run).shards["1"],
    )
    assert (marked.pids, marked.benchmarks, agg.results.read(marked.key)) == (
        plain.pids,
        plain.benchmarks,
        agg.results.read(plain.key),
    )
    assert marked.benchmarks == 2


def test_a_tar_whose_pax_records_override_its_headers_is_merged_as_validation_read_it(isolated, project, run_id):
    from tests.unit.test_normalize import _pax_overridden

    agg = isolated.aggregator
    data = __import__("gzip").compress(_pax_overridden("size", "3"))
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, "1", data, total=1))
    )
    put(grant.model_dump(), data)
    assert agg.record_arrival.record(grant.key) == "recorded"
    assert agg.ledger.reads.snapshot(project, run_id).shards["1"].normalized is None and not _has(
        agg, normalized_key(grant.key)
    )
    isolated.finalize_requests()
    with mock.patch.object(forward_part, "splice") as spliced:
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert spliced.call_count == 0
    [upload] = isolated.upstream.uploads(run_id)
    with tarfile.open(archive_of(upload)) as tar:
        assert tar.extractfile("./runner.log").read() == b"run"  # the 3 bytes validation read, not the header's 11
