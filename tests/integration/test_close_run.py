"""Closing a run: by hand, with nothing in, and at its deadline. Against moto's server (real HTTP, real
boto3, real presigned URLs), driven step by step."""

from dataclasses import replace

import pytest

from codspeed_wire.api import CloseRequest
from tests.factories import bundle, push


def test_close_finishes_with_what_arrived_and_names_missing_and_skipped_shards(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=3)["key"])
    answer = agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert answer.state == "closing"
    assert agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert {s.name: s.state for s in report.shards} == {"1": "arrived", "2": "missing", "3": "skipped"}
    assert (
        agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message
        == "run is already forwarded: nothing to close"
    )


def test_a_run_closed_with_nothing_arrived_ends_empty_and_forwards_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    push(agg, project, run_id, "1", bundle(), total=2)  # granted, never counted
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "closed_empty"
    assert agg.reports.report(project, run_id).state == "closed_empty" and not isolated.upstream.uploads(run_id)


@pytest.mark.slow
def test_the_sweeper_closes_runs_past_their_deadline(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    isolated.finalize_requests()
    assert (project, run_id) not in agg.close_run.sweep()
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, run_id) in late.close_run.sweep()
    assert {"project": project, "run_id": run_id, "reason": "deadline"} in isolated.finalize_requests()
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "missing"
    assert (project, run_id) not in late.close_run.sweep()


@pytest.mark.slow
def test_the_next_attempt_keeps_the_skip_list_so_its_deadline_reports_the_skip_not_a_loss(isolated, project, run_id):
    agg = isolated.aggregator
    for name in ("1", "2"):
        agg.record_arrival.record(push(agg, project, run_id, name, bundle(4242, [f"t{name}::a"]), total=3)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    again = push(agg, project, run_id, "2", bundle(4242, ["t2::b"]), total=3)  # a re-run of job 2
    assert agg.record_arrival.record(again["key"]) == "recorded" and again["run_id"] == f"{run_id}~2"
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, f"{run_id}~2") in late.close_run.sweep()  # shard 3 never comes: the deadline closes it
    assert agg.finalize_run.finalize(project, f"{run_id}~2") == "forwarded"
    report = agg.reports.report(project, run_id)
    assert report.run_id == f"{run_id}~2" and {s.name: s.state for s in report.shards}["3"] == "skipped"


def test_close_and_the_ci_webhook_act_on_the_latest_attempt_and_a_named_one_on_that_one(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::a"]), total=2)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    # attempt 2, open
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4242, ["t1::b"]), total=2)["key"])
    named = agg.close_run.close(CloseRequest(project=project, run_id=f"{run_id}~1"))
    assert (named.run_id, named.state, named.message) == (
        run_id,
        "forwarded",
        "run is already forwarded: nothing to close",
    )
    assert agg.close_run.close_finished_ci_run(project, run_id) == [f"{run_id}~2"]
    assert agg.close_run.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"
