"""Each wire contract from both sides: what the client (or CodSpeed's runner) sends, the server parses."""

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from codspeed_client import metadata as client_metadata
from codspeed_client.bundle import Bundle
from codspeed_client.ci import CiContext
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_wire.upstream import RunPart, UploadAccepted, UploadMetadata
from tests.factories import metadata, restated, upload_request

MD5 = "XrY7u+Ae7tCTyyK7j1rNww=="


def test_client_built_metadata_is_valid_codspeed_metadata():
    ctx = CiContext(
        provider="GITHUB_ACTIONS", ref="refs/heads/main", job="bench", extra={"ghData": {"runId": "9", "job": "bench"}}
    )
    built = client_metadata.build(ctx, project="acme/widgets", run_id="9", commit="a" * 40, shard="2")
    parsed = UploadMetadata.model_validate(built)
    assert parsed.project == "acme/widgets" and parsed.run_part.run_part_id == pushed_part_id("2", "valgrind")
    assert parsed.wire() == built  # nothing lost, nothing added


def test_carried_metadata_keeps_its_fields_but_not_the_runners_md5():
    carried = metadata("A" * 22 + "==", futureField={"nested": [1, 2]})
    made = Bundle(Path("shard.tar.gz"), 0, str, [], carried_metadata=carried, md5=lambda: MD5)
    built = client_metadata.build(
        CiContext(), project="acme/widgets", run_id="9", commit="b" * 40, shard="1", bundle=made, md5=MD5
    )
    assert built["futureField"] == {"nested": [1, 2]} and built["profileMd5"] == MD5  # this bundle's, not the runner's


def test_unknown_metadata_fields_survive_a_round_trip():
    original = metadata(
        MD5,
        futureField={"a": 1},
        runPart={"runId": "1", "runPartId": "p", "jobName": "j", "metadata": {"x": 1}, "extra": True},
    )
    assert UploadMetadata.model_validate(original).wire() == original


def test_a_request_names_its_md5_and_its_crc32_is_optional():
    request = ShardUploadRequest.model_validate(upload_request("acme/widgets", "r1", "2", b"data", total=4))
    assert request.total == 4 and request.md5 == request.metadata.profile_md5 and request.crc32 is None
    assert json.loads(request.metadata_body) == request.metadata.wire()


@pytest.mark.parametrize(
    "change, field",
    [
        ({"shard": "a/b"}, "shard"),
        ({"shard": ".."}, "shard"),
        ({"shard": "bad\nname"}, "shard"),
        ({"shard": "x" * 500}, "shard"),
        ({"project": "no-slash"}, "project"),
        ({"project": "../etc"}, "project"),
        ({"run_id": "r id with spaces"}, "run_id"),
        ({"total": 0}, "total"),
        ({"total": 10_000}, "total"),
        ({"size": 0}, "size"),
        ({"md5": "not-base64"}, "md5"),
        ({"crc32": "AAAAAAAA"}, "crc32"),
        ({"unexpected": 1}, "unexpected"),
        ({"base_ancestors": ["HEAD"]}, "base_ancestors"),
        ({"base_ancestors": ["a" * 40] * 51}, "base_ancestors"),
    ],
)
def test_bad_upload_requests_name_the_field(change, field):
    data = {**upload_request("acme/widgets", "r1", "2", b"data"), **change}
    with pytest.raises(ValidationError) as caught:
        ShardUploadRequest.model_validate(data)
    assert field in {str(part) for e in caught.value.errors() for part in e["loc"]}


def test_a_request_cannot_state_two_manifests_or_a_different_md5():
    with pytest.raises(ValidationError, match="either total"):
        ShardUploadRequest.model_validate(upload_request("acme/widgets", "r1", "a", b"d", total=2, expect=["a", "b"]))
    data = restated(upload_request("acme/widgets", "r1", "a", b"d"), profileMd5=MD5)
    with pytest.raises(ValidationError, match="profileMd5 differs"):
        ShardUploadRequest.model_validate(data)
    client = upload_request("acme/widgets", "r1", "a", b"d", checksum="crc32")
    assert ShardUploadRequest.model_validate(client).crc32
    with pytest.raises(ValidationError, match="md5\n  Field required"):
        ShardUploadRequest.model_validate({k: v for k, v in client.items() if k != "md5"})


@pytest.mark.parametrize(
    "body, said",
    [
        (
            lambda b: b.replace('{"repositoryProvider"', '{"repository":"other","repositoryProvider"', 1),
            "metadata_body names 'repository' twice: a body is read one way only",
        ),
        (
            lambda b: b.replace('"runPart":{', '"runPart":{"runId":"9",', 1),
            "metadata_body names 'runId' twice: a body is read one way only",
        ),
        (
            lambda b: b.replace('"acme"', '"someone"', 1),
            "metadata_body does not say what metadata says, type for type: send the same object in both",
        ),
        (lambda b: b[:-1], "metadata_body is not JSON"),
    ],
    ids=["duplicate-key", "duplicate-nested-key", "says-another-owner", "not-json"],
)
def test_a_metadata_body_that_reads_two_ways_or_says_something_else_is_refused(body, said):
    """The body goes upstream byte for byte: it is read one way only (a serde reader refuses a key
    twice; others keep the first value, Python's json the last), and says what the metadata says."""
    request = upload_request("acme/widgets", "r1", "a", b"d")
    request["metadata_body"] = body(request["metadata_body"])
    with pytest.raises(ValidationError, match=re.escape(said)):
        ShardUploadRequest.model_validate(request)


def test_metadata_schema_refusals():
    for bad in (
        {"commitHash": "not-a-sha"},
        {"version": 0},
        {"runner": {"name": ""}},
        {"owner": "a/../b"},
        {"owner": "a//b"},
    ):
        with pytest.raises(ValidationError):
            UploadMetadata.model_validate({**metadata(MD5), **bad})


def test_run_part_total_comes_from_the_matrix_metadata():
    assert RunPart(run_id="1", run_part_id="a", metadata={"job-total": 3}).total_parts() == 3
    assert RunPart(run_id="1", run_part_id="a", metadata={"job-total": "5"}).total_parts() == 5
    assert RunPart(run_id="1", run_part_id="a", metadata={"job-total": True}).total_parts() is None
    assert RunPart(run_id="1", run_part_id="a").total_parts() is None


def test_upload_accepted_is_codspeeds_answer():
    assert UploadAccepted(uploadUrl="https://u", runId="r").model_dump() == {
        "status": "success",
        "uploadUrl": "https://u",
        "runId": "r",
    }


def test_close_request_refuses_unknown_fields_and_bad_names():
    with pytest.raises(ValidationError):
        CloseRequest.model_validate({"project": "a/b", "run_id": "1", "skip": ["../x"]})
    with pytest.raises(ValidationError):
        CloseRequest.model_validate({"project": "a/b", "run_id": "1", "force": True})


@pytest.mark.parametrize(
    "change, says",
    [
        ({}, "give total (a shard count), expect (shard names) or jobs (a CodSpeed workflow's)"),
        ({"total": 2, "expect": ["a", "b"]}, "give either total (a shard count) or expect (shard names), not both"),
        ({"total": 3, "skip": ["4"]}, "skip names 4, not among the run's shards (1, 2, 3)"),
        ({"expect": ["a", "a"]}, "expect lists a shard name twice"),
        ({"total": 2, "commit": "HEAD"}, "String should match pattern"),
        ({"jobs": {"bench": 0}}, "jobs bench=0: a job runs 1 to 1000 times"),
        ({"jobs": {}}, "jobs"),
        ({"jobs": {"bench": 2}, "skip": ["1"]}, "skip names shards of total or expect; this open declares jobs only"),
        (
            {"total": 2, "metadata": metadata(None, owner="other")},
            "metadata names project other/widgets, not acme/widgets",
        ),
        (
            {"total": 2, "metadata": metadata(None, commit="b" * 40)},
            f"metadata names commit {'b' * 40}, not {'a' * 40}",
        ),
    ],
)
def test_an_open_request_names_what_it_cannot_declare(change, says):
    from codspeed_wire.api import OpenRequest

    with pytest.raises(ValidationError, match=re.escape(says)):
        OpenRequest.model_validate({"project": "acme/widgets", "run_id": "r1", "commit": "a" * 40, **change})
    assert OpenRequest.model_validate(
        {"project": "acme/widgets", "run_id": "r1", "commit": "a" * 40, "total": 3, "skip": ["3"]}
    ).manifest_names() == ["1", "2", "3"]


def test_an_open_request_may_declare_a_codspeed_workflows_jobs_alone_with_the_metadata_its_shards_send():
    from codspeed_wire.api import OpenRequest

    request = OpenRequest.model_validate(
        {
            "project": "acme/widgets",
            "run_id": "r1",
            "commit": "a" * 40,
            "jobs": {"bench": 4, "memory": 1},
            "metadata": metadata(None, commit="A" * 40),
        }
    )
    assert (request.jobs, request.manifest_names(), request.metadata.commit_hash) == (
        {"bench": 4, "memory": 1},
        [],
        "A" * 40,
    )


def test_a_forward_mode_is_parts_by_default_or_one_upload_its_earlier_names_kept_and_a_projects_own_mode_wins(
    monkeypatch,
):
    from codspeed_aggregator.settings import MissingSetting, Settings

    monkeypatch.delenv("FORWARD_MODE", raising=False)
    monkeypatch.delenv("FORWARD_MODES", raising=False)
    assert Settings.from_env().forward_mode == "parts" and Settings.from_env().sends_parts(
        "acme/any"
    )  # as CodSpeed does
    monkeypatch.setenv("FORWARD_MODES", "acme/one=one-upload,acme/each=parts")
    assert not Settings.from_env().sends_parts("acme/one") and Settings.from_env().sends_parts("acme/each")
    monkeypatch.setenv("FORWARD_MODE", "one-upload")
    monkeypatch.setenv("FORWARD_MODES", " acme/fast = parts ,acme/slow=one-upload,")
    settings = Settings.from_env()
    assert (
        settings.sends_parts("acme/fast"),
        settings.sends_parts("acme/slow"),
        settings.sends_parts("acme/other"),
    ) == (
        True,
        False,
        False,
    )
    for old in ("eager", "merged", "sometimes"):  # the names of before the first release are not read either
        monkeypatch.setenv("FORWARD_MODES", f"acme/x={old}")
        with pytest.raises(
            MissingSetting, match=rf"^FORWARD_MODES \(acme/x\) must be parts or one-upload, not '{old}'$"
        ):
            Settings.from_env()


def test_the_clients_report_types_are_the_report_models_fields_required_and_not():
    """The client reads the report in TypedDicts of its own (it stays light: no pydantic); each has
    its model's fields, each required exactly where the model requires it."""
    from codspeed_rules import report_json
    from codspeed_wire import report

    pairs = [
        (report_json.ReportJson, report.Report),
        (report_json.ShardJson, report.ShardEntry),
        (report_json.BenchmarkJson, report.BenchmarkEntry),
        (report_json.CountsJson, report.BenchmarkCounts),
        (report_json.UpstreamJson, report.UpstreamEntry),
        (report_json.OverlapJson, report.Overlap),
        (report_json.ShardBenchmarksJson, report.ShardBenchmarks),
    ]
    for typed, model in pairs:
        fields = model.model_fields
        assert set(typed.__annotations__) == set(fields), (typed.__name__, set(typed.__annotations__) ^ set(fields))
        required = {name for name, f in fields.items() if f.is_required()}
        assert typed.__required_keys__ == required, (typed.__name__, typed.__required_keys__ ^ required)
