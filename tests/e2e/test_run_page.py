"""The run page in a real browser: Debian's chromium-headless-shell driven by Playwright,
against the local stack. Screenshots go under the pytest temp folder."""

import os
import uuid
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from tests.factories import bundle, put, upload_request, wait_for

BROWSER = os.environ.get("CHROMIUM_HEADLESS_SHELL", "/usr/bin/chromium-headless-shell")


@pytest.fixture(scope="module")
def browser():
    if not Path(BROWSER).exists():
        pytest.fail(
            f"no browser at {BROWSER}: apt-get install chromium-headless-shell (or set CHROMIUM_HEADLESS_SHELL to one)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=BROWSER)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, tmp_path):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    yield opened
    opened.screenshot(path=str(tmp_path / "last.png"), full_page=True)  # the page as the test left it
    context.close()


def _push(stack, project: str, run_id: str, shard: str, data: bytes, total: int, **meta) -> None:
    request = upload_request(project, run_id, shard, data, total=total, **meta)
    answer = requests.post(
        f"{stack.api_url}/v1/uploads", json=request, timeout=10, headers={"Authorization": f"Bearer {stack.token}"}
    )
    assert answer.status_code == 201, answer.text
    put(answer.json(), data)


def _report(stack, project: str, run_id: str) -> dict:
    answer = requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}", timeout=10, headers={"Authorization": f"Bearer {stack.token}"}
    )
    return answer.json() if answer.status_code == 200 else {}


def _shard_bundle(index: int, cost: int = 1000, benchmarks: int = 2) -> bytes:
    names = [f"tests/test_part{index}.py::test_{j}" for j in range(benchmarks)]
    return bundle(100 + index, names, costs={name: cost for name in names})


@pytest.mark.slow
def test_a_run_page_shows_shards_results_as_they_land_and_turns_final_by_itself(stack, page, tmp_path):
    project, run_id = f"acme/page-{uuid.uuid4().hex[:6]}", "run-live"
    for index in (1, 2):
        _push(stack, project, run_id, str(index), _shard_bundle(index), total=3)
    report = wait_for(lambda: (r := _report(stack, project, run_id)).get("arrived") == 2 and r)
    assert report["page_url"].startswith(f"{stack.api_url}/runs/{project}/{run_id}?expires=")

    page.goto(report["page_url"])
    assert page.locator("#run-state").inner_text() == "open"
    said = page.locator("#benchmarks-said").inner_text()  # nothing past the threshold: a sentence, no empty table
    assert said.startswith("0 regressions, 0 improvements, 0 unchanged, 4 new")  # every benchmark counted
    caption = page.locator("#benchmarks caption")
    running = page.get_by_role("listitem", name="shard 3: running")
    assert running.count() == 1
    page.screenshot(path=str(tmp_path / "two-of-three.png"), full_page=True)
    page.select_option("#shard-filter", "2")  # a shard's page, from the server: every benchmark of it
    page.wait_for_url("**shard=2**")
    rows = page.locator("#benchmarks tbody tr")
    assert (
        rows.locator("td:nth-child(2)").all_inner_texts() == ["2", "2"]
        and "2 benchmarks of shard 2" in caption.inner_text()
    )

    _push(stack, project, run_id, "3", _shard_bundle(3), total=3)
    page.locator("#run-state", has_text="forwarded").wait_for(timeout=20_000)  # no reload: the page refreshed itself
    page.select_option("#shard-filter", "3")
    page.wait_for_url("**shard=3**")
    assert rows.locator("td:nth-child(2)").all_inner_texts() == ["3", "3"]
    assert page.get_by_role("listitem", name="shard 3: arrived").count() == 1
    assert page.locator("main").get_attribute("data-final") == "true"
    assert page.get_by_role("img", name="Shard timeline").count() == 1  # the chart has an accessible name
    page.screenshot(path=str(tmp_path / "forwarded.png"), full_page=True)


@pytest.mark.slow
def test_a_regression_against_the_baseline_is_flagged_first_and_the_run_list_links_to_it(stack, page, tmp_path):
    project = f"acme/regress-{uuid.uuid4().hex[:6]}"
    for index in (1, 2):  # the baseline: forwarded on main
        _push(stack, project, "main-1", str(index), _shard_bundle(index, cost=1000), total=2)
    wait_for(lambda: _report(stack, project, "main-1").get("state") == "forwarded")
    pull = {"ref": "refs/pull/7/merge", "base_ref": "main", "commit": "b" * 40}
    _push(stack, project, "pr-1", "1", _shard_bundle(1, cost=1300), total=2, **pull)  # 30% slower
    _push(stack, project, "pr-1", "2", _shard_bundle(2, cost=1000), total=2, **pull)
    report = wait_for(lambda: (r := _report(stack, project, "pr-1")).get("state") == "forwarded" and r)
    flagged = [b for b in report["benchmarks"] if b["flag"]]
    assert [(b["name"], b["flag"], round(b["change"], 2)) for b in flagged] == [
        ("tests/test_part1.py::test_0", "regression", 0.3),
        ("tests/test_part1.py::test_1", "regression", 0.3),
    ]
    assert report["baseline"]["run_id"] == "main-1"

    page.goto(report["page_url"])
    first = page.locator("#benchmarks tbody tr").first
    assert "regression" in first.get_attribute("class") and "+30.0%" in first.inner_text()
    page.screenshot(path=str(tmp_path / "regression.png"), full_page=True)

    assert page.locator("#run-list").count() == 0  # a run's signed link opens that run only

    page.set_extra_http_headers({"Authorization": stack.token})  # a token's holder has the list
    page.goto(f"{stack.api_url}/runs/{project}/pr-1")
    page.locator("#run-list").click()
    assert page.locator("#runs tbody tr").count() == 2
    page.set_extra_http_headers({})
    page.get_by_role("link", name="pr-1").click()  # each run of the list by its own signed link
    page.wait_for_url("**sig=**")
    expect(page.locator("#run-state")).to_have_text("forwarded")
    assert page.url.startswith(f"{stack.api_url}/runs/{project}/pr-1?")


@pytest.mark.slow
def test_the_page_sorts_and_filters_with_javascript_off(stack, browser, tmp_path):
    project, run_id = f"acme/nojs-{uuid.uuid4().hex[:6]}", "run-1"
    _push(stack, project, run_id, "1", _shard_bundle(1, cost=500), total=2)
    _push(stack, project, run_id, "2", _shard_bundle(2, cost=9000), total=2)
    report = wait_for(lambda: (r := _report(stack, project, run_id)).get("state") == "forwarded" and r)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(report["page_url"])
    page.select_option("#shard-filter", "2")
    shards = page.locator("#benchmarks tbody tr td:nth-child(2)")
    page.get_by_role("button", name="Show").click()  # the shard's page, from the server
    page.wait_for_url("**shard=2**")  # a click returns once the navigation commits, before the page loads
    expect(shards).to_have_text(["2", "2"])
    page.get_by_role("link", name="Value").click()  # server-sorted, the shard and the signed link kept
    page.wait_for_url("**sort=value**")
    assert "shard=2" in page.url and "sig=" in page.url
    expect(shards).to_have_text(["2", "2"])
    page.screenshot(path=str(tmp_path / "no-javascript.png"), full_page=True)
    context.close()


@pytest.mark.slow
def test_a_tampered_expired_or_missing_link_is_refused_and_a_project_token_opens_the_page(stack):
    project, run_id = f"acme/links-{uuid.uuid4().hex[:6]}", "run-1"
    _push(stack, project, run_id, "1", _shard_bundle(1), total=2)
    url = wait_for(lambda: _report(stack, project, run_id).get("page_url"))
    base, query = url.split("?")
    expires, sig = (part.split("=")[1] for part in query.split("&"))
    cases = {
        "altered signature": (
            f"{base}?expires={expires}&sig={sig[:-1]}{'0' if sig[-1] != '0' else '1'}",
            403,
            "altered",
        ),
        "later expiry": (f"{base}?expires={int(expires) + 1}&sig={sig}", 403, "altered"),
        "another run": (f"{stack.api_url}/runs/{project}/run-2?expires={expires}&sig={sig}", 403, "another run"),
        "expired": (None, 403, "expired"),
        "no signature": (base, 401, "signed link"),
    }
    from codspeed_aggregator.auth import page_key, signed_query

    cases["expired"] = (f"{base}?{signed_query(page_key(stack.webhook_secret), project, run_id, 1000)}", 403, "expired")
    for name, (link, status, words) in cases.items():
        answer = requests.get(link, timeout=10)
        assert (answer.status_code, words in answer.json()["error"]) == (status, True), name
    answer = requests.get(base, headers={"Authorization": f"Bearer {stack.token}"}, timeout=10)
    assert answer.status_code == 200 and "text/html" in answer.headers["content-type"]
    assert requests.get(url, timeout=10).status_code == 200


def test_a_projects_list_is_its_own_even_when_a_shorter_project_has_a_run_of_its_name(stack):
    from codspeed_aggregator.wiring import for_operator

    group = f"grp{uuid.uuid4().hex[:6]}"
    short, longer = f"{group}/sub", f"{group}/sub/repo"
    _push(stack, short, "repo", "1", bundle(), total=2)  # grp/sub's run "repo": /runs/grp/sub/repo names it too
    _push(stack, longer, "r1", "1", bundle(), total=2)
    tokens = for_operator().project_tokens
    listed = requests.get(
        f"{stack.api_url}/runs/{longer}", headers={"Authorization": tokens.create(longer)}, timeout=10
    )
    assert listed.status_code == 200 and ">r1<" in listed.text
    run = requests.get(
        f"{stack.api_url}/runs/{short}/repo", headers={"Authorization": tokens.create(short)}, timeout=10
    )
    assert run.status_code == 200 and 'id="run-state"' in run.text


def test_a_signed_list_link_hands_out_run_links_that_end_with_it(stack):
    import re
    import time

    from codspeed_aggregator.auth import page_key, signed_query

    project = f"acme/links-{uuid.uuid4().hex[:6]}"
    _push(stack, project, "r1", "1", bundle(), total=2)
    expires = int(time.time()) + 120
    listed = requests.get(
        f"{stack.api_url}/runs/{project}?{signed_query(page_key(stack.webhook_secret), project, '', expires)}",
        timeout=10,
    )
    assert listed.status_code == 200
    handed = [int(e) for e in re.findall(r"expires=(\d+)", listed.text)]
    assert handed and all(e <= expires for e in handed)


def test_on_a_phone_the_page_keeps_its_width_and_its_text_readable(stack, browser, tmp_path):
    project, run_id = f"acme/phone-{uuid.uuid4().hex[:6]}", "run-1"
    _push(stack, project, run_id, "1", _shard_bundle(1, benchmarks=4), total=3)
    url = wait_for(lambda: (r := _report(stack, project, run_id)).get("arrived") == 1 and r["page_url"])
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    phone.goto(url)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # the timeline and table scroll inside
    tick = phone.locator("#timeline text.tick").first.bounding_box()
    assert tick["height"] >= 10, tick  # the time axis at its own size, not shrunk to 4 px
    assert phone.locator("#verdict").inner_text().startswith("0 regressions, 0 improvements, 0 unchanged, 4 new")
    phone.select_option("#shard-filter", "1")  # the page goes to the shard's list at once
    phone.wait_for_url("**shard=1**")
    for column in ("Benchmark", "Value", "Change"):  # without scrolling: the reviewer's question on screen
        box = phone.locator("#benchmarks th", has_text=column).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (column, box)
    name = phone.locator("#benchmarks tbody td").first.bounding_box()
    assert name["x"] + name["width"] <= 390, name  # a shard's list: a long benchmark name wraps in its cell
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
    context.close()


def test_on_a_phone_a_runs_upstream_run_ids_wrap_within_the_page(browser):
    """Comma-joined upstream run ids (a run of many parts) do not wrap by themselves: the page grew to
    915-937 px on a 390 px phone."""
    from codspeed_aggregator.pages.run_page import render_run
    from codspeed_wire.report import Report, UpstreamEntry

    ids = ",".join(uuid.uuid4().hex for _ in range(12))
    report = Report(
        project="acme/widgets",
        run_id="r1",
        state="forwarded",
        partial=False,
        version=9,
        arrived=12,
        shards=[],
        generated_at="2026-12-05T10:00:00Z",
        upstream=UpstreamEntry(run_id=ids, status="accepted", at="2026-12-05T10:00:00Z", message="12 shards"),
    )
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    phone.set_content(render_run(report, {}, None, None))
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    assert phone.locator("dd", has_text=ids[:32]).bounding_box()["width"] <= 390
    context.close()
