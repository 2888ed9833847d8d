"""Closing a run: by hand, with nothing in, and at its deadline. Against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

from dataclasses import replace



from codspeed_wire.api import CloseRequest
from tests.factories import bundle, push


def test_close_finishes_with_what_arrived_and_names_missing_and_skipped_shards(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(push(agg, project, run_id, "1", bundle(), total=3)["key"])
    answer = agg.closing.close(CloseRequest(project=project, run_id=run_id, skip=["3"]))
    assert answer.state == "closing"
    assert agg.closing.close(CloseRequest(project=project, run_id=run_id)).message == "a close was already under way"
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert {s.name: s.state for s in report.shards} == {"1": "arrived", "2": "missing", "3": "skipped"}
    assert agg.closing.close(CloseRequest(project=project, run_id=run_id)).message == "run is already forwarded: nothing to close"


def test_a_run_closed_with_nothing_arrived_ends_empty_and_forwards_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    push(agg, project, run_id, "1", bundle(), total=2)  # granted, never counted
    agg.closing.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalizing.finalize(project, run_id) == "closed_empty"
    assert agg.reports.report(project, run_id).state == "closed_empty" and not isolated.upstream.uploads(run_id)


def test_the_sweeper_closes_runs_past_their_deadline(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    isolated.finalize_requests()
    assert (project, run_id) not in agg.closing.sweep()
    late = replace(agg, clock=lambda: __import__("time").time() + agg.settings.run_deadline_seconds + 60)
    assert (project, run_id) in late.closing.sweep()
    assert {"project": project, "run_id": run_id, "reason": "deadline"} in isolated.finalize_requests()
    assert agg.finalizing.finalize(project, run_id) == "forwarded"
    assert {s.name: s.state for s in agg.reports.report(project, run_id).shards}["2"] == "missing"
    assert (project, run_id) not in late.closing.sweep()
