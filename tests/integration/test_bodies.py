"""One reading of a body, on every route, before anything is stored: a body naming a key twice (readers
disagree on which value it means, and what the drop-in keeps goes upstream as bytes), one that is not
UTF-8 (API Gateway hands it over base64-encoded), one over 256 KiB counted in bytes. Each refusal says
why, and changes nothing."""

import base64
import json
from unittest import mock

import pytest

from codspeed_aggregator import wiring
from codspeed_aggregator.handlers import api as api_handler
from codspeed_local.gateway import http_api_event
from codspeed_local.lambda_context import LocalContext
from tests import runner
from tests.conftest import TOKEN
from tests.factories import footprint, upload_request


def _call(agg, path: str, body: bytes, base64_encoded: bool = False) -> tuple[int, dict]:
    event = http_api_event("POST", path, {"content-type": "application/json", "authorization": TOKEN}, body)
    if base64_encoded:  # as API Gateway hands over a body that is not UTF-8
        event = {**event, "body": base64.b64encode(body).decode(), "isBase64Encoded": True}
    with mock.patch.object(wiring, "for_api", lambda: agg):
        answer = api_handler.handler(event, LocalContext("ApiFunction"))
    return answer["statusCode"], json.loads(answer.get("body") or "{}")


def _runner_body(project: str, run_id: str) -> bytes:
    return runner.body_of(runner.github_job(project, run_id, runner.recorded(1), "a" * 40))


@pytest.mark.parametrize(
    "field, twice",
    [
        ("repository", '"repository":"someone-else",'),
        ("tokenless", '"tokenless":true,'),
        ("profileMd5", '"profileMd5":"AAAAAAAAAAAAAAAAAAAAAA==",'),
        ("runPart", '"runPart":null,'),
    ],
)
def test_a_runner_post_naming_a_key_twice_is_refused_naming_it_and_changes_nothing(
    isolated, project, run_id, field, twice
):
    """It was taken: the aggregator checked the last value (Python's json) and forwarded the bytes, whose
    first value went upstream unchecked, or a serde reader refused the part after we said 200."""
    body = _runner_body(project, run_id).replace(
        b'{"repositoryProvider"', b"{" + twice.encode() + b'"repositoryProvider"', 1
    )
    before = footprint(isolated, project, run_id)
    assert _call(isolated.aggregator, "/upload", body) == (
        422,
        {"error": f"request body names {field!r} twice in one object: a body is read one way only"},
    )
    assert footprint(isolated, project, run_id) == before


def test_a_nested_key_twice_is_refused_on_the_clients_route_too(isolated, project, run_id):
    request = json.dumps(upload_request(project, run_id, "1", b"data", total=2)).encode()
    body = request.replace(b'"shard": "1"', b'"shard": "1", "shard": "2"', 1)
    before = footprint(isolated, project, run_id)
    assert _call(isolated.aggregator, "/v1/uploads", body) == (
        422,
        {"error": "request body names 'shard' twice in one object: a body is read one way only"},
    )
    assert footprint(isolated, project, run_id) == before


@pytest.mark.parametrize("path", ["/upload", "/v1/uploads", "/v1/runs/open", "/v1/runs/close"])
def test_a_body_that_is_not_utf8_is_a_400_saying_so_and_changes_nothing(isolated, project, run_id, path):
    """API Gateway hands it over base64-encoded: it was a traceback (500)."""
    body = _runner_body(project, run_id).replace(b"bench", b"b\xffnch", 1)
    before = footprint(isolated, project, run_id)
    at = body.index(b"\xff")
    assert _call(isolated.aggregator, path, body, base64_encoded=True) == (
        400,
        {"error": f"request body is not UTF-8 (byte {at} is 0xff): send JSON in UTF-8"},
    )
    assert footprint(isolated, project, run_id) == before


def test_the_256_kib_limit_counts_bytes_not_characters(isolated, project, run_id):
    """90,000 characters of '€' are 270,000 bytes: they passed a count of characters, and failed at PutItem."""
    request = upload_request(project, run_id, "1", b"data", total=2)
    body = json.dumps({**request, "padding": "€" * 90_000}, ensure_ascii=False).encode()
    assert len(body) > api_handler.MAX_BODY > len(body.decode())
    status, answer = _call(isolated.aggregator, "/v1/uploads", body)
    assert (status, answer) == (
        413,
        {"error": f"request body over {api_handler.MAX_BODY} bytes: bundles go to the upload URL, not the API"},
    )


def test_an_open_as_large_as_the_api_takes_in_non_ascii_text_is_kept(isolated, project, run_id):
    """240 KB of '€' in the metadata an open states: kept as it is, it fits its item; written with JSON's
    escapes (six bytes a character) it was over DynamoDB's 400 KB, and the open a 500."""
    from tests.factories import md5_b64, metadata

    owner, repository = project.rsplit("/", 1)
    stated = metadata(md5_b64(b""), owner=owner, repository=repository, commit="a" * 40, laterField="€" * 78_000)
    request = {
        "project": project,
        "run_id": run_id,
        "total": 2,
        "commit": "a" * 40,
        "ref": "refs/heads/main",
        "metadata": stated,
    }
    body = json.dumps(request, ensure_ascii=False).encode()
    assert 230_000 < len(body) <= api_handler.MAX_BODY
    status, answer = _call(isolated.aggregator, "/v1/runs/open", body)
    assert status == 200, answer
    from codspeed_aggregator.domain.records import OPENED

    assert isolated.aggregator.ledger.shards.upload_metadata(project, run_id, OPENED)["laterField"] == "€" * 78_000


SERDE_REFUSES = [  # (a token in place of a value, the path it is at, what the refusal says of it)
    ("NaN", "NaN, which is no JSON value (serde_json refuses it): send a finite number or null"),
    ("Infinity", "Infinity, which is no JSON value (serde_json refuses it): send a finite number or null"),
    ("-Infinity", "-Infinity, which is no JSON value (serde_json refuses it): send a finite number or null"),
    ("1e999", "the number 1e999, past a 64-bit float's range (serde_json refuses it)"),
    ('"\\udc80"', "a lone surrogate escape (\\udc80), no Unicode character: serde_json refuses it"),
]


@pytest.mark.parametrize("token, said", SERDE_REFUSES, ids=["nan", "inf", "-inf", "1e999", "surrogate"])
def test_json_serde_refuses_is_refused_on_the_runners_route_naming_what_and_where(
    isolated, project, run_id, token, said
):
    """Python's json read them and the bytes went upstream as they came; on a fork's run a stranger's
    ``"note": Infinity`` failed the contributor's whole run at its forward (after 3 tries)."""
    body = _runner_body(project, run_id).replace(b'"tokenless":false', b'"tokenless":false,"note":' + token.encode(), 1)
    assert b'"note"' in body
    before = footprint(isolated, project, run_id)
    assert _call(isolated.aggregator, "/upload", body) == (
        422,
        {"error": f"request body at note: {said}: a body is read as CodSpeed's runner reads it"},
    )
    assert footprint(isolated, project, run_id) == before


@pytest.mark.parametrize("token, said", SERDE_REFUSES, ids=["nan", "inf", "-inf", "1e999", "surrogate"])
def test_json_serde_refuses_is_refused_on_the_clients_route_too(isolated, project, run_id, token, said):
    request = upload_request(project, run_id, "1", b"data", total=2)
    body = json.dumps(request).encode().replace(b'"metadata": {', b'"metadata": {"note": ' + token.encode() + b", ", 1)
    before = footprint(isolated, project, run_id)
    assert _call(isolated.aggregator, "/v1/uploads", body) == (
        422,
        {"error": f"request body at metadata.note: {said}: a body is read as CodSpeed's runner reads it"},
    )
    assert footprint(isolated, project, run_id) == before


@pytest.mark.parametrize(
    "field, checked, sent",
    [("version", 10, 10.0), ("tokenless", False, 0), ("allowEmpty", True, 1), ("cpu", 0.0, -0.0)],
    ids=["10.0", "0-for-false", "1-for-true", "-0.0"],
)
def test_a_metadata_body_saying_another_type_than_its_metadata_is_refused(
    isolated, project, run_id, field, checked, sent
):
    """Equal to Python, so taken: upstream received ``"version":10.0``, ``"tokenless":0``."""
    request = upload_request(project, run_id, "1", b"data", total=2)
    request["metadata"][field] = checked
    body_said = {**request["metadata"], field: sent}
    request["metadata_body"] = json.dumps(body_said, separators=(",", ":"))
    before = footprint(isolated, project, run_id)
    status, answer = _call(isolated.aggregator, "/v1/uploads", json.dumps(request).encode())
    assert status == 422 and "metadata_body does not say what metadata says, type for type" in answer["error"]
    assert footprint(isolated, project, run_id) == before


HUGE = "9" * 5000  # past the 4300 digits Python's int() reads: a ValueError, answered 500 with a traceback


@pytest.mark.parametrize(
    "path, at", [("/upload", "note"), ("/v1/uploads", "note"), ("/v1/runs/open", "note"), ("/v1/runs/close", "note")]
)
def test_an_integer_of_5000_digits_is_a_422_naming_where_on_every_route_and_changes_nothing(
    isolated, project, run_id, path, at
):
    """As serde_json reads it: an integer past u64 is a float, and one past f64's range is refused."""
    if path == "/upload":
        body = _runner_body(project, run_id).replace(
            b'"tokenless":false', f'"tokenless":false,"note":{HUGE}'.encode(), 1
        )
    else:
        body = json.dumps({"project": project, "run_id": run_id, "note": int(HUGE[:100])}).encode()
        body = body.replace(HUGE[:100].encode(), HUGE.encode())
    before = footprint(isolated, project, run_id)
    status, answer = _call(isolated.aggregator, path, body)
    assert (status, answer["error"][:60]) == (422, f"request body at {at}: the number {HUGE[:40]}, past a 6"[:60])
    assert footprint(isolated, project, run_id) == before


@pytest.mark.parametrize("segment", ["job", "count"])
def test_a_buildkite_segment_of_5000_digits_is_a_422_naming_the_segment(isolated, project, run_id, segment):
    index, count = (HUGE, "3") if segment == "job" else ("0", HUGE)
    body = _runner_body(project, run_id)
    before = footprint(isolated, project, run_id)
    status, answer = _call(isolated.aggregator, f"/upload/buildkite/{run_id}/step-1/job-1/{index}/{count}", body)
    assert status == 422 and "the upload URL's parallel job" in answer["error"], answer
    assert footprint(isolated, project, run_id) == before


def test_an_integer_past_u64_of_fewer_digits_than_f64_holds_is_read_as_a_float(isolated, project, run_id):
    from codspeed_rules.runner_json import read

    assert read("[18446744073709551615, 18446744073709551616, -9223372036854775809]") == [
        18446744073709551615,
        1.8446744073709552e19,
        -9.223372036854776e18,
    ]
    assert read("[" + "9" * 300 + "]") == [1e300]
