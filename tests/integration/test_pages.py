"""Run pages' links and results as the aggregator publishes them (moto, no browser)."""

from codspeed_wire.api import ShardUploadRequest
from codspeed_wire.report import render_markdown
from tests.factories import bundle, put, upload_request


def test_without_a_readable_webhook_secret_runs_still_count_and_reports_carry_no_page_link(stack, monkeypatch, caplog):
    from codspeed_aggregator import wiring

    monkeypatch.delenv("WEBHOOK_SECRET", raising=False)
    monkeypatch.setenv("WEBHOOK_SECRET_PARAMETER", "/codspeed-aggregator/never-created")
    wiring.reset()
    try:
        agg = wiring.aggregator()
        assert agg.page_key is None and "run pages get no signed links" in caplog.text
        data = bundle()
        grant = agg.request_upload(ShardUploadRequest.model_validate(upload_request("acme/nosecret", "r1", "1", data, total=2)))
        put(grant.model_dump(), data)
        assert agg.record_arrival(grant.key) == "recorded"
        report = agg.report("acme/nosecret", "r1")
        assert report.page_url is None and report.arrived == 1 and "Run page" not in render_markdown(report)
    finally:
        monkeypatch.undo()
        wiring.reset()


def test_the_markdown_report_lists_what_changed_past_the_threshold_and_links_the_page(isolated, project, run_id):
    from dataclasses import replace

    agg = replace(isolated.aggregator, page_key=b"k" * 32,
                  settings=replace(isolated.aggregator.settings, public_url="https://agg.example"))
    names = ["t::steady", "t::slow|er"]
    for run, cost, meta in ((f"{run_id}-main", 1000, {}),
                            (run_id, 1500, {"ref": "refs/pull/3/merge", "base_ref": "main", "commit": "d" * 40})):
        data = bundle(7, names, costs={"t::steady": 1000, "t::slow|er": cost})
        grant = agg.request_upload(ShardUploadRequest.model_validate(upload_request(project, run, "1", data, total=1, **meta)))
        put(grant.model_dump(), data)
        agg.record_arrival(grant.key)
        isolated.finalize_requests()
        assert agg.finalize(project, run) == "forwarded"
    report = agg.report(project, run_id)
    assert report.page_url.startswith(f"https://agg.example/runs/{project}/{run_id}?expires=")
    markdown = render_markdown(report)
    assert "Changes past 5% against the baseline (1):" in markdown
    assert r"| t\:\:slow&#124;er | 1 | +50.0% regression | 1,500 cycles | 1,000 cycles |" in markdown  # escaped
    assert f"[Run page]({report.page_url})" in markdown
