"""Run pages' links and results as the aggregator publishes them (moto, no browser)."""

from unittest import mock

import pytest

from codspeed_wire.api import ShardUploadRequest
from codspeed_wire.markdown import render_markdown
from tests.factories import bundle, put, upload_request


def test_without_a_readable_webhook_secret_runs_still_count_and_reports_carry_no_page_link(stack, monkeypatch, caplog):
    from codspeed_aggregator import wiring

    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    monkeypatch.setenv(
        "WEBHOOK_SECRET_PARAMETER", "/codspeed-aggregator/webhook-secret"
    )  # the template's, never created
    wiring.reset()
    try:
        agg = wiring.for_arrivals()
        assert agg.page_key is None and "run pages get no signed links" in caplog.text
        data = bundle()
        grant = wiring.for_api().request_upload.grant(
            ShardUploadRequest.model_validate(upload_request("acme/nosecret", "r1", "1", data, total=2))
        )
        put(grant.model_dump(), data)
        # the shared stack's own arrivals poller takes the same S3 event: whichever comes first counts it, once
        assert agg.record_arrival.record(grant.key) in ("recorded", "duplicate")
        report = agg.reports.report("acme/nosecret", "r1")
        assert report.page_url is None and report.arrived == 1 and "Run page" not in render_markdown(report)
    finally:
        monkeypatch.undo()
        wiring.reset()


@pytest.mark.slow
def test_the_markdown_report_lists_what_changed_past_the_threshold_and_links_the_page(isolated, project, run_id):
    from dataclasses import replace

    agg = replace(
        isolated.aggregator,
        page_key=b"k" * 32,
        settings=replace(isolated.aggregator.settings, public_url="https://agg.example"),
    )
    names = ["t::steady", "t::slow|er"]
    for run, cost, meta in (
        (f"{run_id}-main", 1000, {}),
        (run_id, 1500, {"ref": "refs/pull/3/merge", "base_ref": "main", "commit": "d" * 40}),
    ):
        data = bundle(7, names, costs={"t::steady": 1000, "t::slow|er": cost})
        grant = agg.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request(project, run, "1", data, total=1, **meta))
        )
        put(grant.model_dump(), data)
        agg.record_arrival.record(grant.key)
        isolated.finalize_requests()
        assert agg.finalize_run.finalize(project, run) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert report.page_url.startswith(f"https://agg.example/runs/{project}/{run_id}?expires=")
    markdown = render_markdown(report)
    assert "Regressions past 5% against the baseline:" in markdown and "1 regression (worst +50.0%)" in markdown
    assert r"| t\:\:slow&#124;er | 1 | +50.0% | 1,500 cycles | 1,000 cycles |" in markdown  # escaped
    assert f"[Run page]({report.page_url})" in markdown


@pytest.mark.slow
def test_an_open_run_compares_with_a_baseline_forwarded_elsewhere_within_a_minute(isolated, project, run_id):
    from dataclasses import replace

    now = [1_800_000_000.0]
    agg = replace(isolated.aggregator, clock=lambda: now[0])
    other = replace(isolated.aggregator, clock=lambda: now[0])  # another process: caches of its own
    pull = {"ref": "refs/pull/9/merge", "base_ref": "main", "commit": "e" * 40}

    def arrive(aggregator, run, shard, cost, **meta):
        data = bundle(7 + int(shard), [f"t{shard}::x"], costs={f"t{shard}::x": cost})
        grant = aggregator.request_upload.grant(
            ShardUploadRequest.model_validate(upload_request(project, run, shard, data, total=2, **meta))
        )
        put(grant.model_dump(), data)
        assert aggregator.record_arrival.record(grant.key) == "recorded"

    arrive(agg, run_id, "1", 1200, **pull)  # no baseline yet: looked up, and that absence is not kept
    assert agg.reports.report(project, run_id).baseline is None
    for shard in ("1", "2"):
        arrive(other, f"{run_id}-main", shard, 1000)
    isolated.finalize_requests()
    assert other.finalize_run.finalize(project, f"{run_id}-main") == "forwarded"
    now[0] += 5
    with mock.patch.object(
        agg.ledger.baselines, "latest_baseline", wraps=agg.ledger.baselines.latest_baseline
    ) as looked_up:
        agg.reports.refresh(project, run_id)  # a new report version, 5 s on: looked up again, and found
        assert looked_up.call_count == 1 and agg.reports.report(project, run_id).baseline["run_id"] == f"{run_id}-main"
        arrive(agg, run_id, "2", 1000, **pull)  # the run's next change, within the minute: the one found is kept
        assert looked_up.call_count == 1
    report = agg.reports.report(project, run_id)
    assert report.baseline["run_id"] == f"{run_id}-main"
    [entry] = [b for b in report.benchmarks if b.name == "t1::x"]
    assert (entry.flag, round(entry.change, 2)) == ("regression", 0.2)


def test_each_arrival_records_what_its_benchmarks_cost_and_the_page_predicts_the_longest_shard_balanced(
    isolated, project, run_id
):
    from codspeed_aggregator.pages.run_page import render_main
    from codspeed_wire.api import CloseRequest
    from tests.factories import push

    agg = isolated.aggregator
    for shard, costs in (("1", {"t1::a": 80_000_000, "t1::b": 40_000_000}), ("2", {"t2::a": 40_000_000})):
        data = bundle(20 + int(shard), list(costs), costs=costs)  # instructions: 40 M a second under callgrind
        assert agg.record_arrival.record(push(agg, project, run_id, shard, data, total=3)["key"]) == "recorded"
    report = agg.reports.report(project, run_id)
    assert [(s.name, s.cost_s, s.longest_s) for s in report.shards] == [
        ("1", 3.0, 2.0),
        ("2", 1.0, 1.0),
        ("3", None, None),
    ]
    assert 'id="predicted"' not in render_main(report, {}, None, None)  # open: its third shard may still come
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert isolated.finalize_all(project, run_id) == "forwarded"
    page = render_main(agg.reports.report(project, run_id), {}, None, None)
    assert (
        "Recorded costs: 4.0s of benchmarks in 2 shards; balanced on them (<code>codspeed-client split --shards 2"
        "</code>), the longest shard would run about 2.0s, against 3.0s for shard 1 here."
    ) in page
