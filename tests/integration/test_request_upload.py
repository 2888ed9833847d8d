"""Granting uploads: presigned URLs, refusals, drop-in runs and attempts. Against moto's server (real
HTTP, real boto3, real presigned URLs), driven step by step."""

from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import ValidationError

from codspeed_aggregator.domain.errors import Conflict, NotFound, Unprocessable
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_wire.upstream import UploadMetadata
from tests.factories import Clock, bundle, crc32_b64, grant, md5_b64, metadata, push, put, upload_request


def test_the_presigned_url_signs_md5_length_and_type_with_sigv4_and_a_short_expiry(isolated, project, run_id):
    data = bundle()
    grant = isolated.aggregator.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, "1", data, total=2))
    )
    query = parse_qs(urlsplit(grant.upload_url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert int(query["X-Amz-Expires"][0]) <= 900
    assert set(query["X-Amz-SignedHeaders"][0].split(";")) >= {"content-md5", "content-length", "content-type", "host"}
    assert grant.key.startswith(f"bundles/{project.replace('/', '%2F')}/{run_id}/1/")  # the project: one key segment
    assert grant.headers == {
        "Content-MD5": md5_b64(data),
        "Content-Length": str(len(data)),
        "Content-Type": "application/gzip",
    }


def test_the_clients_md5_and_crc32_are_both_signed_and_the_bundle_counts(isolated, project, run_id):
    """The client's MD5 is CodSpeed's profileMd5, which the part goes upstream under as it was pushed:
    S3 checks the bytes against it, and against the CRC32 the client takes in the same pass."""
    agg, data = isolated.aggregator, bundle()
    request = upload_request(project, run_id, "1", data, total=1, checksum="crc32")
    grant = agg.request_upload.grant(ShardUploadRequest.model_validate(request))
    signed = set(parse_qs(urlsplit(grant.upload_url).query)["X-Amz-SignedHeaders"][0].split(";"))
    assert signed == {"x-amz-checksum-crc32", "content-md5", "content-length", "content-type", "host"}
    assert grant.headers == {
        "Content-MD5": md5_b64(data),
        "x-amz-checksum-crc32": crc32_b64(data),
        "Content-Length": str(len(data)),
        "Content-Type": "application/gzip",
    }
    put(grant.model_dump(), data)
    assert agg.record_arrival.record(grant.key) == "recorded"
    report = agg.reports.report(project, run_id)
    assert (report.arrived, report.shards[0].state) == (1, "arrived")


def test_refusals_name_the_problem_and_change_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    before = agg.reports.report(project, run_id)
    with pytest.raises(Conflict, match="expects 3 shards, but the run was opened expecting 2 shards"):
        push(agg, project, run_id, "2", bundle(), total=3)
    with pytest.raises(Conflict, match=r"commitHash is '1{40}' in this shard but '5f1c"):
        push(agg, project, run_id, "2", bundle(), total=2, commit="1" * 40)
    with pytest.raises(Unprocessable, match="shard '7' is not in the run's manifest"):
        push(agg, project, run_id, "7", bundle(), total=2)
    with pytest.raises(Unprocessable, match="cannot skip 9"):
        agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["9"]))
    with pytest.raises(NotFound):
        agg.close_run.close(CloseRequest(project=project, run_id="no-such-run"))
    after = agg.reports.report(project, run_id)
    assert after.model_dump(exclude={"generated_at"}) == before.model_dump(exclude={"generated_at"})


def test_a_push_after_the_close_goes_to_the_next_attempt_and_the_close_never_waits_for_it(isolated, project, run_id):
    """A close says the jobs of its CI run ended: an upload asked after it is a later job's (a re-run, or
    a gate that did not wait for its jobs), counted in the run's next attempt, which takes it at once."""
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    late = push(agg, project, run_id, "2", bundle(4243), total=2)
    assert (late["run_id"], late["attempt"]) == (f"{run_id}~2", 2)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert agg.record_arrival.record(late["key"]) == "recorded"
    assert [s.state for s in agg.reports.report(project, run_id).shards] == ["arrived", "arrived"]  # attempt 2's


def test_drop_in_metadata_without_run_part_is_a_run_of_one_shard(isolated):
    data = bundle()
    meta = UploadMetadata.model_validate(metadata(md5_b64(data)))
    accepted = isolated.aggregator.runner_upload.accept(meta)
    assert accepted.runId.startswith("5f1c2e3d4b5a-")
    assert "X-Amz-Signature" in accepted.uploadUrl


def test_the_next_attempt_copies_the_earlier_shards_once_not_at_every_upload(isolated, project, run_id):
    agg = isolated.aggregator
    for shard in ("1", "2", "3"):
        agg.record_arrival.record(push(agg, project, run_id, shard, bundle(), total=3)["key"])
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    calls = []
    agg.ledger.db.meta.events.register("before-call.dynamodb.PutItem", lambda **kw: calls.append(1))
    try:
        push(agg, project, run_id, "1", bundle(), total=3)  # opens attempt 2: copies 3 shards and their metadata
        opened = len(calls)
        calls.clear()
        for shard in ("2", "3"):
            push(agg, project, run_id, shard, bundle(), total=3)
    finally:
        agg.ledger.db.meta.events.unregister("before-call.dynamodb.PutItem")
    assert opened >= 6 and len(calls) == 2 * 3  # later uploads: the probe of the first attempt and their own two items
    assert agg.reports.report(project, f"{run_id}~2").arrived == 3


def test_a_push_naming_an_attempt_counts_in_the_runs_current_attempt(isolated, project, run_id):
    clock = Clock()
    agg = replace(isolated.aggregator, clock=clock)
    assert grant(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=2)["run_id"] == run_id
    assert grant(agg, project, f"{run_id}~2", "2", bundle(4242, ["t2::a"]), total=2)["run_id"] == run_id  # still open
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    clock.now += agg.settings.presign_expiry_seconds + 1  # neither was sent before its URL expired
    assert agg.finalize_run.finalize(project, run_id) == "closed_empty"  # nothing was PUT: no bundle arrived
    again = push(agg, project, f"{run_id}~1", "1", bundle(4242, ["t1::b"]), total=2)
    assert (again["run_id"], again["attempt"]) == (f"{run_id}~2", 2)  # never a run of its own, "<run>~1~2"
    assert agg.ledger.runs.run_record(project, f"{run_id}~2").attempt.number == 2


def test_a_ci_run_page_named_by_the_push_is_the_reports_link_and_one_that_would_not_stay_a_link_is_refused(
    isolated, project, run_id
):
    agg, data = isolated.aggregator, bundle()
    page = "https://gitlab.example.com/platform/perf/widgets/-/pipelines/88"
    agg.request_upload.grant(
        ShardUploadRequest.model_validate({**upload_request(project, run_id, "1", data, total=2), "ci_url": page})
    )
    assert agg.reports.report(project, run_id).ci_url == page
    for bad in ("javascript:alert(1)", "https://e.example/a) [x](https://evil.example", "https://e.example/a b"):
        with pytest.raises(ValidationError, match="ci_url"):
            ShardUploadRequest.model_validate(
                {**upload_request(project, run_id + "-x", "1", data, total=2), "ci_url": bad}
            )
    assert agg.ledger.runs.run_record(project, run_id + "-x") is None  # refused before anything was written


@pytest.mark.parametrize(
    "shard, total, refused, says",
    [
        ("1", 4, Conflict, "manifest mismatch: this shard expects 4 shards, but the run was opened expecting 3 shards"),
        ("7", 3, Unprocessable, "shard '7' is not in the run's manifest"),
    ],
)
@pytest.mark.slow
def test_a_push_a_forwarded_run_refuses_opens_no_next_attempt(isolated, project, run_id, shard, total, refused, says):
    """The next attempt took the refused push's own manifest before its checks: it was opened (its
    run item, tallies and copied shards), then the push refused."""
    from tests.factories import footprint

    agg = isolated.aggregator
    for name in ("1", "2", "3"):
        agg.record_arrival.record(push(agg, project, run_id, name, bundle(), total=3)["key"])
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    before = footprint(isolated, project, run_id)
    with pytest.raises(refused, match=says):
        push(agg, project, run_id, shard, bundle(), total=total)
    assert footprint(isolated, project, run_id) == before
    assert push(agg, project, run_id, "1", bundle(), total=3)["run_id"] == f"{run_id}~2"  # a push it takes opens it


@pytest.mark.slow
def test_a_push_outside_its_own_manifest_opens_no_run_and_changes_a_runner_only_run_in_no_way(
    isolated, project, run_id
):
    """The shard's own manifest was checked only once the run (or its client group) was written:
    a fresh run id was opened, and a run of runner jobs alone got a client group, then the push refused."""
    from tests.factories import footprint
    from tests.runner import github_run_part
    from tests.runner import metadata as runner_metadata

    agg = isolated.aggregator
    with pytest.raises(Unprocessable, match="shard '9' is not in the run's manifest \\(3 shards\\)"):
        push(agg, project, run_id, "9", bundle(), total=3)
    assert agg.ledger.runs.run_record(project, run_id) is None

    owner, repository = project.split("/")
    data = bundle(4343, ["bench::a"])
    meta = runner_metadata(
        data,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit="5f1c2e3d4b5a69788796a5b4c3d2e1f0a9b8c7d6",
        run_part=github_run_part(run_id, "bench", "valgrind"),
    )
    agg.runner_upload.accept(UploadMetadata.model_validate(meta))
    before = footprint(isolated, project, run_id)
    with pytest.raises(Unprocessable, match="shard '9' is not in the run's manifest"):
        push(agg, project, run_id, "9", bundle(), total=3)
    assert footprint(isolated, project, run_id) == before
