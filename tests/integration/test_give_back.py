"""A client gives back a grant it will not use: its shard is rejected with the client's reason, and no
close waits for its URL. Only the grant's key can give it back; a bundle in the bucket is never given
back; twice, or anyone else's, changes nothing. Through the API's own handler, against moto's server."""

import pytest

from codspeed_wire.api import CloseRequest
from tests.factories import bundle, footprint, grant, push, put
from tests.fork_pull_request import call, upload

REASON = "shard.tar.gz would be refused by the aggregator: member ../etc/passwd leaves the folder"


def _give_back(agg, key: str, reason: str = REASON, token: str | None = None) -> tuple[int, dict]:
    return call(agg, "POST", "/v1/uploads/give-back", {"key": key, "reason": reason}, token=token)


@pytest.fixture
def agg(isolated, project):
    from dataclasses import replace

    token = isolated.aggregator.project_tokens.create(project)
    return replace(isolated.aggregator), token


def test_a_grant_given_back_is_its_shard_rejected_with_the_clients_reason_and_the_close_waits_for_nothing(
    isolated, agg, project, run_id
):
    agg, token = agg
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242), total=2)["key"])
    refused = grant(agg, project, run_id, "2", bundle(4243), total=2)  # its client refused its own bundle
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))  # from outside CI: the URL is awaited
    assert agg.finalize_run.finalize(project, run_id) == "waiting"
    status, answer = _give_back(agg, refused["key"], token=token)
    assert status == 200, answer
    said = f"given back by its client before its bundle was sent: {REASON}"
    assert (answer["state"], answer["reason"]) == ("given_back", said)
    assert {"project": project, "run_id": run_id, "reason": "arrival"} in isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # at once, not at the URL's expiry
    shards = {s.name: s for s in agg.reports.report(project, run_id).shards}
    assert (shards["2"].state, shards["2"].reason) == ("rejected", said)


def test_every_refusal_of_a_give_back_says_why_and_changes_nothing(isolated, agg, project, run_id):
    agg, token = agg
    data = bundle(4242)
    sent = push(agg, project, run_id, "1", data, total=2)  # its bundle is in the bucket
    given = grant(agg, project, run_id, "2", bundle(4243), total=2)
    assert _give_back(agg, given["key"], token=token)[0] == 200
    other = given["key"].replace(given["upload_id"], "0" * 32)
    for key, expected in (
        (sent["key"], (409, f"upload {sent['upload_id']}'s bundle is in the bucket: it counts, and is not given back")),
        (given["key"], (409, f"upload {given['upload_id']} of run {run_id} was given back already")),
        (other, (404, f"no upload {'0' * 32} was granted for run {run_id} of {project}")),
        ("bundles/x", (422, "'bundles/x' is not an upload's key (its grant's answer says it: key)")),
    ):
        before = footprint(isolated, project, run_id)
        status, answer = _give_back(agg, key, token=token)
        assert (status, answer.get("error")) == expected
        assert footprint(isolated, project, run_id) == before
    before = footprint(isolated, project, run_id)
    assert _give_back(agg, given["key"])[0] == 401  # no token, and not a fork's run
    assert _give_back(agg, given["key"], reason="a\nb", token=token)[0] == 422
    assert footprint(isolated, project, run_id) == before
    assert agg.record_arrival.record(sent["key"]) == "recorded"  # the bundle sent counts, as ever


def test_a_forks_grantee_gives_back_its_own_grant_without_a_token_and_a_stranger_cannot(isolated, github, fork):
    agg, project, run_id = fork
    request, _ = upload(project, run_id, "2")
    status, granted = call(agg, "POST", "/v1/uploads", request)
    assert status == 201
    before = footprint(isolated, project, run_id)
    stranger = granted["key"].replace(granted["upload_id"], "f" * 32)  # the run's public facts, not the key
    assert _give_back(agg, stranger)[0] == 404 and footprint(isolated, project, run_id) == before
    assert _give_back(agg, granted["key"])[0] == 200


def test_a_bundle_put_after_its_grant_was_given_back_still_counts(isolated, agg, project, run_id):
    """Invariant 3: nothing accepted is lost, whatever its client said before."""
    agg, token = agg
    data = bundle(4243)
    given = grant(agg, project, run_id, "2", data, total=2)
    assert _give_back(agg, given["key"], token=token)[0] == 200
    put(given, data)
    assert agg.record_arrival.record(given["key"]) == "recorded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "arrived"


def test_a_push_again_given_back_while_its_shard_is_counted_changes_nothing_and_says_so(isolated, agg, project, run_id):
    agg, token = agg
    agg.record_arrival.record(push(agg, project, run_id, "2", bundle(4242), total=2)["key"])
    again = grant(agg, project, run_id, "2", bundle(4243), total=2)  # pushed again, its bundle refused on the way
    before = footprint(isolated, project, run_id)
    status, answer = _give_back(agg, again["key"], token=token)
    assert (status, answer["state"]) == (200, "counted_already")
    assert (
        answer["reason"]
        == f"shard 2 is counted already (another upload of it): nothing waits for upload {again['upload_id']}"
    )
    assert footprint(isolated, project, run_id) == before
