"""The run page's HTML: every text from a bundle or a request inert, links that keep the
signature, a chart with accessible names."""

import re
from html.parser import HTMLParser

from codspeed_aggregator.pages.run_page import render_list, render_main, render_run
from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry, Report, ShardBenchmarks, ShardEntry

HOSTILE = '<script>alert("x")</script>&"\''


def _report(**changes) -> Report:
    fields = dict(
        project="acme/widgets",
        run_id="r1",
        commit="c" * 40,
        state="open",
        partial=True,
        version=4,
        expected=3,
        arrived=2,
        opened_at="2026-11-30T07:00:00Z",
        generated_at="2026-11-30T07:10:00Z",
        threshold=0.05,
        shards=[
            ShardEntry(name="1", state="arrived", arrived_at="2026-11-30T07:04:00Z"),
            ShardEntry(name=HOSTILE, state="arrived", arrived_at="2026-11-30T07:08:00Z"),
            ShardEntry(name="3", state="expected"),
        ],
        benchmarks=[
            BenchmarkEntry(
                name=HOSTILE,
                shard="1",
                state="measured",
                unit="cycles",
                value=1300,
                baseline=1000,
                change=0.3,
                flag="regression",
            ),
            BenchmarkEntry(name="t::fast", shard=HOSTILE, state="measured", unit="ns", value=2500.0),
        ],
        counts=BenchmarkCounts(measured=2, regressions=1, new=1, worst_regression=0.3),
    )
    return Report(**{**fields, **changes})


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts, self.text = [], []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def test_names_from_bundles_are_text_never_markup():
    html = render_run(_report(), {"expires": "1", "sig": "ab"}, "?format=fragment", "/runs/acme/widgets")
    parsed = _Collect()
    parsed.feed(html)
    assert len(parsed.scripts) == 1 and "alert" not in parsed.scripts[0]  # only the page's own script
    assert HOSTILE in "".join(parsed.text)  # shown as written
    assert "<script>alert" not in html


def test_bidi_and_invisible_controls_in_names_are_written_out_on_the_page():
    tricky = "test_\u202egnp.exe\u200b"
    html = render_run(
        _report(
            shards=[ShardEntry(name="1", label=tricky, state="arrived", arrived_at="2026-11-30T07:04:00Z")],
            benchmarks=[BenchmarkEntry(name=tricky, shard="1", state="measured", unit="ns", value=1.0)],
        ),
        {},
        "?format=fragment",
        None,
    )
    assert "\u202e" not in html and "\u200b" not in html
    assert "test_U+202Egnp.exeU+200B" in html


def test_sort_links_and_the_filter_form_keep_the_signed_link_and_work_without_javascript():
    main = render_main(_report(), {"expires": "99", "sig": "feed"}, "?x", None)
    links = re.findall(r'<a href="([^"]+)" data-sort="(\w+)"', main)
    assert {sort for _, sort in links} == {"name", "shard", "state", "value", "change"}
    assert all("expires=99" in href and "sig=feed" in href for href, _ in links)
    assert (
        '<input type="hidden" name="expires" value="99">' in main
        and '<input type="hidden" name="sig" value="feed">' in main
    )
    shard = ShardBenchmarks(
        project="acme/widgets",
        run_id="r1",
        shard="1",
        state="arrived",
        benchmarks=[
            BenchmarkEntry(name=f"t::{i}", shard="1", state="measured", unit="cycles", value=1000 - i) for i in range(3)
        ],
    )
    by_value = render_main(_report(), {"sort": "value", "shard": "1"}, None, None, shard)
    assert by_value.count("<tr class=") == 3 and "3 benchmarks of shard 1" in by_value  # the shard's page, every one
    assert by_value.index("t::0") < by_value.index("t::2")  # sorted on the server, the largest value first
    assert '<option value="1" selected>' in by_value
    summary = render_main(_report(), {}, None, None)
    assert "1 regression (worst +30.0%), 0 improvements, 0 unchanged, 1 new" in summary


def test_the_timeline_names_each_strip_and_the_page_stops_refreshing_once_final():
    main = render_main(_report(), {}, "?format=fragment", None)
    assert 'role="img" aria-labelledby="timeline-title"' in main
    assert 'aria-label="shard 1: arrived, arrived 2026-11-30T07:04:00Z (4m 00s after the opening)"' in main
    assert 'aria-label="shard 3: running"' in main
    assert 'data-final="false"' in main and 'data-refresh="?format=fragment"' in main
    final = render_main(_report(state="forwarded", partial=False), {}, "?format=fragment", None)
    assert 'data-final="true"' in final and "Updating while the run is open" not in final
    sent_as_parts = render_main(
        _report(shards=[ShardEntry(name="1", state="arrived", arrived_at="2026-11-30T07:04:00Z", upstream=True)]),
        {},
        None,
        None,
    )
    assert (
        'aria-label="shard 1: arrived, upstream, arrived 2026-11-30T07:04:00Z' in sent_as_parts
    )  # a parts run's, sent


def test_the_run_list_links_each_run_and_escapes_what_it_shows():
    class Run:
        run_id, state, commit, ref, created_at = HOSTILE, "open", "abc", "refs/heads/main", "2026-11-30T07:00:00Z"

    html = render_list("acme/widgets", [(Run(), "/runs/acme/widgets/x?sig=1")])
    assert '<a href="/runs/acme/widgets/x?sig=1">' in html and "<script>alert" not in html


def test_the_page_leads_with_the_verdict_and_draws_time_as_it_passed():
    shards = [
        ShardEntry(name="1", state="arrived", arrived_at="2026-11-30T07:04:00Z"),
        ShardEntry(name="2", state="carried"),
        ShardEntry(name="3", state="expected"),
    ]
    main = render_main(_report(shards=shards, baseline={"run_id": "main-1", "commit": "b" * 40}), {}, None, None)
    verdict = re.search(r'<p id="verdict" class="verdict regression" role="status">([^<]+)</p>', main)
    assert (
        verdict
        and verdict.group(1)
        == "1 regression (worst +30.0%), 0 improvements, 0 unchanged, 1 new against run main-1 so far"
    )
    assert main.index('id="verdict"') < main.index("<dl>")  # before everything else
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', main)
    assert ticks == ["opened", "+2m 30s", "+5m 00s", "+7m 30s", "+10m 00s"]  # opened 07:00, generated 07:10
    carried = re.search(r'aria-label="shard 2: carried">.*?</g>', main).group(0)
    assert 'fill="none"' in carried and 'width="13"' in carried  # a mark, not a bar across the run
    assert "background:#1565c0;opacity:0.55" in main  # the running swatch is faded like its bar
    assert '<div class="scroll"><svg id="timeline"' in main and '<div class="scroll"><table id="benchmarks">' in main


def test_the_page_says_which_shard_the_run_waited_for_and_by_how_much():
    done = _report(state="forwarded", partial=False, shards=_report().shards[:2])
    main = render_main(done, {}, None, None)  # shard 1 at 07:04, the hostile one at 07:08, opened 07:00
    assert re.search(r'<p id="critical-path">([^<]*)', main).group(1).startswith("Critical path: shard &lt;script&gt;")
    text = "".join(_text(main))
    assert (
        f"Critical path: shard {HOSTILE} arrived last, 8m 00s after the opening, 4m 00s after shard 1, the one before "
        "it." in text
    )
    # while shard 3 still runs, the last arrival is not the critical path (the page named it so)
    waiting = "".join(_text(render_main(_report(), {}, None, None)))
    assert (
        "Critical path" not in waiting and f"So far shard {HOSTILE} arrived last, 8m 00s after the opening" in waiting
    )
    assert "1 shard still running." in waiting
    alone = render_main(
        _report(
            state="forwarded",
            shards=[
                ShardEntry(name="1", state="arrived", arrived_at="2026-11-30T07:00:05Z"),
                ShardEntry(name="2", state="missing"),
            ],
        ),
        {},
        None,
        None,
    )
    assert "Critical path: shard 1 arrived last, 5s after the opening." in "".join(_text(alone))
    assert 'id="critical-path"' not in render_main(
        _report(shards=[ShardEntry(name="1", state="expected")]), {}, None, None
    )


def test_the_page_says_what_the_recorded_costs_predict_for_the_longest_shard_balanced():
    shards = [
        ShardEntry(name="1", state="arrived", cost_s=50.0, longest_s=4.0),
        ShardEntry(name=HOSTILE, state="arrived", cost_s=10.0, longest_s=2.0),
        ShardEntry(name="3", state="carried"),
    ]  # no cost of its own in this run
    text = "".join(_text(render_main(_report(shards=shards, state="forwarded"), {}, None, None)))
    assert (
        "Recorded costs: 1m 00s of benchmarks in 2 shards; balanced on them (codspeed-client split --shards 2), "
        "the longest shard would run about 30.0s, against 50.0s for shard 1 here."
    ) in text
    heavy = [
        ShardEntry(name="1", state="arrived", cost_s=100.0, longest_s=90.0),
        ShardEntry(name="2", state="arrived", cost_s=20.0, longest_s=1.0),
    ]  # one benchmark is most of it
    assert "would run about 1m 30s, against 1m 40s for shard 1 here" in "".join(
        _text(render_main(_report(shards=heavy, state="forwarded"), {}, None, None))
    )
    tiny = [
        ShardEntry(name="1", state="arrived", cost_s=0.012, longest_s=0.004),
        ShardEntry(name="2", state="arrived", cost_s=0.0003, longest_s=0.0003),
    ]  # valgrind: millions of instructions
    assert "Recorded costs: 12.3ms of benchmarks in 2 shards" in "".join(
        _text(render_main(_report(shards=tiny, state="forwarded"), {}, None, None))
    )
    one = render_main(_report(shards=shards[:1]), {}, None, None)
    assert 'id="predicted"' not in one and 'id="predicted"' not in render_main(_report(), {}, None, None)


def _text(html: str) -> list[str]:
    collect = _Collect()
    collect.feed(html)
    return collect.text


def test_the_page_links_the_projects_runs_on_codspeed_when_the_run_goes_there():
    linked = render_main(_report(codspeed_url="https://codspeed.io/acme/widgets"), {}, None, None)
    assert '<dt>CodSpeed</dt><dd><a href="https://codspeed.io/acme/widgets">the project\'s runs</a></dd>' in linked
    assert "codspeed.io" not in render_main(_report(), {}, None, None)


def test_a_shards_page_of_many_benchmarks_comes_in_pages_each_well_under_lambdas_answer():
    many = [
        BenchmarkEntry(name=f"tests/test_big.py::test_{i:05d}", shard="1", state="measured", unit="ns", value=float(i))
        for i in range(40_000)
    ]
    page = ShardBenchmarks(project="acme/widgets", run_id="r1", shard="1", state="arrived", benchmarks=many)
    report = _report()
    first = render_run(
        report, {"expires": "1", "sig": "ab", "shard": "1", "sort": "name"}, "?format=fragment", None, page
    )
    assert len(first.encode()) < 2 << 20  # all 40 000 rows were 12 MB: over the 6 MB Lambda answers
    assert "40000 benchmarks of shard 1: 1 to 5000 shown (page 1 of 8)" in first
    assert (
        len(set(re.findall(r"test_big\.py::test_(\d{5})", first))) == 5000
        and "test_04999" in first
        and "test_05000" not in first
    )
    assert re.search(r'href="\?[^"]*sig=ab[^"]*page=2" rel="next"', first) and 'rel="prev"' not in first
    last = render_run(report, {"shard": "1", "page": "8"}, None, None, page)
    assert "35001 to 40000 shown (page 8 of 8)" in last and 'rel="prev"' in last and 'rel="next"' not in last
    for odd in ("99", "0", "x", "²"):  # past the end, before it, not a number: a page that exists
        assert "shown (page " in render_run(report, {"shard": "1", "page": odd}, None, None, page)


def test_an_open_run_gets_no_split_advice_and_a_cost_never_recorded_is_not_shown_as_zero():
    """An open 3-shard run with 2 in was told to ``split --shards 2``; a shard that measured nothing
    showed "0ms" and counted in the balance."""
    costed = [
        ShardEntry(name="1", state="arrived", cost_s=50.0, longest_s=4.0),
        ShardEntry(name="2", state="arrived", cost_s=10.0, longest_s=2.0),
        ShardEntry(name="3", state="expected"),
    ]
    assert 'id="predicted"' not in render_main(_report(shards=costed), {}, None, None)
    zero = [*costed[:2], ShardEntry(name="3", state="arrived", cost_s=0.0, longest_s=0.0)]
    text = "".join(_text(render_main(_report(shards=zero, state="forwarded"), {}, None, None)))
    assert "Recorded costs: 1m 00s of benchmarks in 2 shards" in text and "0ms" not in text


def test_the_time_axis_never_repeats_a_label_however_short_the_run():
    for seconds, ticks in (
        (2, ["opened", "+1s", "+2s"]),
        (3, ["opened", "+1s", "+2s", "+3s"]),
        (1, ["opened", "+1s"]),
        (7, ["opened", "+2s", "+4s", "+6s"]),
        (3600, ["opened", "+15m 00s", "+30m 00s", "+45m 00s", "+1h 00m"]),
    ):
        report = _report(
            generated_at=f"2026-11-30T{7 + seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}Z"
        )
        found = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', render_main(report, {}, None, None))
        assert found == ticks, (seconds, found)


def test_a_benchmark_two_shards_measured_is_named_on_the_page_as_text():
    from codspeed_wire.report import Overlap

    overlap = Overlap(benchmark="t::<b>", executor="valgrind", shards=["1", "2"], in_shards=2)
    main = render_main(_report(state="forwarded", partial=False, overlaps=[overlap], overlaps_total=1), {}, None, None)
    assert 'id="overlaps"' in main and "Measured in more than one shard (1): t::&lt;b&gt; (valgrind) in 1, 2" in main
    assert 'id="overlaps"' not in render_main(_report(state="forwarded", partial=False), {}, None, None)


def test_a_run_with_nothing_past_the_threshold_says_so_in_a_sentence_not_an_empty_table():
    quiet = _report(benchmarks=[], counts=BenchmarkCounts(measured=4, unchanged=4))
    html = render_main(quiet, {}, None, None)
    assert '<table id="benchmarks"' not in html and "<thead>" not in html
    assert "0 regressions, 0 improvements, 4 unchanged (threshold 5%): nothing changed past it" in html
    assert 'id="shard-filter"' in html  # every shard's page still a choice away


def test_a_run_whose_every_shard_was_carried_says_its_benchmarks_came_from_the_baseline():
    carried = _report(
        benchmarks=[], arrived=0, counts=BenchmarkCounts(carried=7), shards=[ShardEntry(name="1", state="carried")]
    )
    html = render_main(carried, {}, None, None)
    assert "7 benchmarks carried from the baseline run, none measured in this run." in html
    assert "<thead>" not in html


def test_the_first_line_names_a_missing_shard_beside_benchmarks_missing_each_saying_which():
    """Before: "3 regressions …, 3 missing" (benchmarks), the missing shard named nowhere there."""
    from codspeed_wire.report import ShardEntry

    report = _report()
    crashed = ShardEntry(name="k4", display="benchmarks [shard 4, job 4/4]", state="missing")
    counts = report.counts.model_copy(update={"missing": 3})
    html = render_run(report.model_copy(update={"shards": [*report.shards, crashed], "counts": counts}), {}, None, None)
    first = html.split('id="verdict"', 1)[1].split("</p>", 1)[0]
    assert "3 benchmarks missing" in first and "shard missing: benchmarks [shard 4, job 4/4]" in first


def test_timeline_labels_are_never_cut_into_duplicates_and_keep_what_tells_a_matrixs_jobs_apart():
    """Before: a Buildkite step's three jobs were three rows ``ffe3811f-d730-421b-97b2-4813``, runner rows lost
    their ``]``: a label was cut at 28 characters."""
    from codspeed_aggregator.pages.timeline import fitted

    jobs = [f"ffe3811f-d730-421b-97b2-4813e0c2a1b7 {i}/3" for i in (1, 2, 3)]
    shown = [fitted(j) for j in jobs]
    assert len(set(shown)) == 3 and all(
        len(s) == 28 and s.endswith(f"{i}/3") for i, s in zip((1, 2, 3), shown, strict=True)
    )
    assert fitted("benchmarks [shard 12, job 12/16, walltime]") == "benchmark…b 12/16, walltime]"
    assert fitted("bench [shard 1]") == "bench [shard 1]"  # what fits is whole


def test_the_comments_headline_and_the_pages_first_line_say_every_reason_the_status_says():
    from codspeed_wire.markdown import verdict
    from codspeed_wire.report import ShardEntry

    report = _report()
    shards = [
        *report.shards,
        ShardEntry(name="k4", display="bench [shard 4, job 4/4]", state="missing"),
        ShardEntry(name="k5", display="bench [shard 5, job 5/5]", state="rejected", reason="given back"),
    ]
    final = report.model_copy(update={"shards": shards, "overlaps_total": 2, "partial": False, "state": "forwarded"})
    headline = verdict(final)
    assert "shards missing" in headline or "shard missing" in headline
    assert "1 shard rejected" in headline and "2 benchmarks measured in two shards" in headline
    first = render_run(final, {}, None, None).split('id="verdict"', 1)[1].split("</p>", 1)[0]
    assert "shard missing: bench [shard 4, job 4/4]" in first and "shard rejected: bench [shard 5, job 5/5]" in first
    assert "2 measured in two shards" in first
