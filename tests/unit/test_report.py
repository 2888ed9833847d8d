from codspeed_aggregator.domain.forwarding import RunForward
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_aggregator.domain.outcome import CarriedShard, ChosenBaseline, Outcome
from codspeed_aggregator.domain.records import FORWARDED, OPEN, RunRecord, ShardRecord, ShardSent, Snapshot
from codspeed_aggregator.domain.report import build_report
from codspeed_aggregator.domain.results import LISTED, merged, summarize
from codspeed_wire.markdown import render_markdown
from codspeed_wire.report import Report


def _snapshot(state=OPEN, skipped=(), upstream=None) -> Snapshot:
    run = RunRecord(
        project="acme/widgets",
        run_id="42",
        groups={"": Manifest(total=4, indexed=True)},
        state=state,
        commit="abc1234",
        rev=7,
        skipped=tuple(skipped),
        forward=RunForward(upstream=upstream),
    )
    shards = {
        "1": ShardRecord("1", "arrived", attempt=2, size=1000, benchmarks=3, arrived_at="2026-11-29T19:00:00Z"),
        "3": ShardRecord("3", "rejected", reason="the bundle is not gzip-compressed"),
    }
    return Snapshot(run, shards)


def test_an_open_run_reports_absent_shards_as_expected_and_says_it_is_partial():
    report = build_report(_snapshot(), "now")
    assert report.partial and report.version == 7 and report.expected == 4 and report.arrived == 1
    assert [(s.name, s.state) for s in report.shards] == [
        ("1", "arrived"),
        ("2", "expected"),
        ("3", "rejected"),
        ("4", "expected"),
    ]
    assert report.shards[0].attempt == 2


def test_a_finished_run_tells_skipped_from_missing():
    upstream = {"run_id": "up-1", "status": "success", "at": "t"}
    report = build_report(_snapshot(FORWARDED, skipped=["4"], upstream=upstream), "now")
    assert not report.partial
    assert {s.name: s.state for s in report.shards} == {"1": "arrived", "2": "missing", "3": "rejected", "4": "skipped"}
    assert report.upstream.run_id == "up-1"


def test_a_codspeed_workflows_job_short_of_its_uploads_is_expected_while_open_and_missing_once_ended():
    run = RunRecord(
        project="acme/widgets",
        run_id="7044",
        groups={"bench": Manifest(total=3), "memory": Manifest(total=1)},
        variants=("bench|valgrind/0", "bench|walltime/0", "memory|valgrind/0"),
    )
    shards = {
        f"bench-{i}@ab": ShardRecord(f"bench-{i}@ab", "arrived", group="bench", label=f"bench-{i}") for i in (1, 2)
    }
    shards["memory@cd"] = ShardRecord("memory@cd", "arrived", group="memory", label="memory")
    shards["bench-3@ef"] = ShardRecord("bench-3@ef", "rejected", group="bench", reason="not gzip")
    opened = build_report(Snapshot(run, shards), "now")
    [job] = [s for s in opened.shards if s.name == "job:bench"]  # memory is in; bench's 6 uploads (2 executors), 2 in
    assert (job.state, job.shown, job.reason) == (
        "expected",
        "bench: 4 of 6 to come",
        "job bench: 4 of its 6 uploads not in yet",
    )
    assert len(opened.shards) == 5 and opened.arrived == 3 and opened.expected == 7

    run.state = FORWARDED
    carried = CarriedShard(run_id="7000", commit="c" * 40, group="bench", benchmarks=1)
    run.outcome = Outcome(
        carried={"bench-9@aa": carried}
    )  # a shard of bench skipped at close, carried: one less to come
    [job] = [s for s in build_report(Snapshot(run, shards), "now").shards if s.name == "job:bench"]
    assert (job.state, job.shown, job.reason) == (
        "missing",
        "bench: 3 of 6 never came",
        "job bench: 3 of its 6 uploads did not arrive",
    )
    assert "Missing shard: bench\\: 3 of 6 never came\n" in render_markdown(build_report(Snapshot(run, shards), "now"))


def test_markdown_says_partial_and_lists_the_shards():
    text = render_markdown(build_report(_snapshot(), "now"))
    verdict, _, first = text.splitlines()[:3]
    assert verdict == "**No benchmark measured yet: 1 of 4 shards in**"
    assert "open, 1/4 shards in" in first and "partial report" in first
    assert "| 3 | rejected |" in text and "the bundle is not gzip-compressed" in text
    final = render_markdown(
        build_report(_snapshot(FORWARDED, upstream={"run_id": "u", "status": "success", "at": "t"}), "now")
    )
    assert "partial" not in final.splitlines()[2] and "Missing shards: 2, 4" in final and "Upstream: success" in final


def test_report_json_round_trips_with_its_stable_keys():
    report = build_report(_snapshot(), "now")
    data = report.model_dump(mode="json")
    for key in (
        "project",
        "run_id",
        "commit",
        "state",
        "partial",
        "version",
        "expected",
        "arrived",
        "shards",
        "upstream",
    ):
        assert key in data
    assert set(data["shards"][0]) >= {"name", "state", "attempt", "size", "benchmarks", "reason"}
    assert Report.model_validate(data) == report


def test_markdown_makes_whatever_came_from_a_bundle_or_a_request_inert():
    from codspeed_wire.report import Report, ShardEntry

    hostile = (
        "x | @acme/team ![img](https://e.example/i.png) [link](https://e.example) <img src=x> **bold** `code`\nnext"
    )
    report = Report(
        project="acme/widgets",
        run_id="r1",
        state="open",
        partial=True,
        version=3,
        expected=2,
        arrived=1,
        generated_at="now",
        shards=[
            ShardEntry(name="1", label=hostile, state="rejected", reason=hostile),
            ShardEntry(name="2", state="expected"),
        ],
    )
    text = render_markdown(report)
    for raw in ("@acme", "![", "](", "<img", "**bold**", "`code`", "x |"):
        assert raw not in text, raw
    row = next(line for line in text.splitlines() if line.startswith("| x"))
    assert row.count("|") == 8  # seven cells: no '|' of the shard's breaks the table
    assert "&#64;acme/team" in row and "\\!\\[img\\]" in row and "\n" not in row


def test_bidi_and_invisible_controls_are_shown_written_out_never_obeyed():
    from codspeed_wire.report import Report, ShardEntry

    tricky = "tests/test_a.py::test_\u202egnp.exe\u200b\u2066x\u2069"
    report = Report(
        project="acme/widgets",
        run_id="r1",
        state="open",
        partial=True,
        version=3,
        expected=1,
        arrived=1,
        generated_at="now",
        shards=[ShardEntry(name="1", label=tricky, state="rejected", reason=tricky)],
    )
    text = render_markdown(report)
    assert not any(c in text for c in "\u202e\u200b\u2066\u2069")
    assert "U\\+202Egnp.exeU\\+200BU\\+2066xU\\+2069" in text


def test_markdown_for_a_pull_request_leads_with_the_outcome_and_folds_the_rest():
    from codspeed_wire.report import Report, ShardEntry, UpstreamEntry

    def report(shards: int) -> str:
        return render_markdown(
            Report(
                project="acme/widgets",
                run_id="7044765741",
                commit="5f1c2e3d4b5a69788796a5b4c3d2e1f0a9b8c7d6",
                state="forwarded",
                partial=False,
                version=42,
                expected=shards,
                arrived=shards - 1,
                generated_at="2026-11-30T10:00:00Z",
                ci_url="https://github.com/acme/widgets/actions/runs/7044765741",
                shards=[ShardEntry(name=str(i), state="arrived", attempt=1, benchmarks=5) for i in range(1, shards)]
                + [ShardEntry(name=str(shards), state="missing")],
                upstream=UpstreamEntry(
                    run_id="9f8e7d6c5b4a39281706f5e4d3c2b1a0", status="success", at="2026-11-30T10:00:00Z"
                ),
            )
        )

    short, long = report(3), report(12)
    verdict, first, second = short.splitlines()[:5:2]
    assert verdict == "**No benchmark measured; 1 of 3 shards missing**"  # the reviewer's question first
    assert first == "CodSpeed shards for acme/widgets run 7044765741: forwarded, 2/3 shards in"
    assert second == "Commit 5f1c2e3d4b5a · [CI run](https://github.com/acme/widgets/actions/runs/7044765741)"
    assert short.index("Missing shard: 3") < short.index("<details open><summary>3 shards</summary>")
    assert "<details><summary>12 shards</summary>" in long  # a long list is folded
    internals = short[short.index("<details><summary>Details</summary>") :]
    assert "Report version 42" in internals and "9f8e7d6c5b4a39281706f5e4d3c2b1a0" in internals
    assert "version 42" not in short[: short.index("<details")] and "9f8e7d6c" not in short[: short.index("<details")]


def test_markdown_names_shards_readably_and_never_says_on_none():
    snapshot = _snapshot()
    snapshot.shards["1"].label = 'bench-{"shard":1}-{"job-index":0,"job-total":4}-{"executor":"valgrind","run-index":0}'
    baseline = _snapshot(FORWARDED)
    baseline.run.run_id, baseline.run.commit = "41", "def5678"
    text = render_markdown(build_report(snapshot, "now", baseline=baseline))
    assert "| bench \\[shard 1, job 1/4\\] | arrived |" in text  # the raw runPartId stays in the JSON's label
    # (the reason's own colon escaped: Markdown shows it as it is)
    assert (
        "Baseline: run 41 on main (commit def5678): main's latest run\\: the change names no base commit" in text
        and "None" not in text
    )
    skipped = render_markdown(build_report(_snapshot(FORWARDED, skipped=["2", "4"]), "now"))
    assert "Skipped shards: 2, 4" in skipped


def test_a_skipped_shard_always_says_why_it_has_no_results():
    def reason(outcome, state=FORWARDED):
        snapshot = _snapshot(state, skipped=["4"])
        snapshot.run.outcome = outcome
        return {s.name: s.reason for s in build_report(snapshot, "now").shards}["4"]

    source = ChosenBaseline(run_id="41", commit="def5678", branch="main", why="main's latest run")
    assert reason(Outcome(baseline=source)) == (
        "skipped, not carried: no run of main up to baseline run 41 still keeps results of it"
    )
    assert reason(Outcome(note="no forwarded run on main yet")) == "no forwarded run on main yet"
    assert reason(Outcome(), "finalizing").startswith("skipped at close: carried from the baseline run")


def test_a_report_counts_every_benchmark_and_names_only_the_worst_changes_whatever_the_runs_size():
    snapshot = _snapshot()
    for n in range(5, 45):
        snapshot.shards[str(n)] = ShardRecord(str(n), "arrived", benchmarks=1000, size=10)
    before = {f"t::{i}": {"unit": "cycles", "value": 1000} for i in range(1000)}
    summaries = {
        name: summarize(
            name,
            {b: {"unit": "cycles", "value": 1000 + int(name) + i % 7} for i, b in enumerate(before)},
            before,
            0.005,
        )
        for name in snapshot.arrived()
        if name != "1"
    }
    baseline = Snapshot(
        RunRecord(project="acme/widgets", run_id="41", groups={}, state=FORWARDED, commit="def5678"),
        {"2": ShardRecord("2", "arrived", benchmarks=12), "5": ShardRecord("5", "arrived", benchmarks=3)},
    )
    report = build_report(snapshot, "now", summary=merged(summaries.values()), baseline=baseline, threshold=0.005)
    assert report.counts.measured == 40_000 == sum(s.counts["measured"] for s in summaries.values())
    assert (
        report.counts.regressions + report.counts.unchanged == 40_000 and report.counts.running == 12
    )  # shard 2 not in
    assert len(report.benchmarks) == LISTED and report.benchmarks[0].shard == "44"  # the worst change first
    assert len(report.model_dump_json()) < 60_000  # 40,000 benchmarks, a summary's size
    text = render_markdown(report)
    assert f"Benchmarks: {report.counts.regressions} regressions (worst +5.0%), 0 improvements" in text
    assert f"the worst 30 of {report.counts.regressions}; every benchmark is on the run page" in text


def test_the_markdown_lists_regressions_in_their_own_table_before_improvements():
    from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry

    def entry(name: str, change: float, flag: str) -> BenchmarkEntry:
        return BenchmarkEntry(
            name=name,
            shard="1",
            state="measured",
            unit="cycles",
            value=1000 * (1 + change),
            baseline=1000,
            change=change,
            flag=flag,
        )

    report = Report(
        project="a/b",
        run_id="r",
        state="forwarded",
        partial=False,
        version=3,
        arrived=1,
        shards=[],
        generated_at="now",
        counts=BenchmarkCounts(measured=5, regressions=2, improvements=1, unchanged=2),
        benchmarks=[
            entry("t::slow", 0.3, "regression"),
            entry("t::slower", 0.1, "regression"),
            entry("t::fast", -0.2, "improvement"),
        ],
    )
    markdown = render_markdown(report)
    assert markdown.splitlines()[0] == "**2 regressions past 5%, worst +30.0% (t\\:\\:slow)**"
    regressions, improvements = (
        markdown.index("Regressions past 5% against the baseline:"),
        markdown.index("Improvements past 5% against the baseline:"),
    )
    assert (
        regressions
        < markdown.index("t\\:\\:slow |")
        < markdown.index("t\\:\\:slower |")
        < improvements
        < markdown.index("| t\\:\\:fast | 1 | -20.0% |")
    )
    cut = render_markdown(report.model_copy(update={"counts": report.counts.model_copy(update={"regressions": 40})}))
    assert "Regressions past 5% against the baseline (the worst 2 of 40; every benchmark is on the run page):" in cut


def test_a_run_forwarded_to_codspeed_links_the_projects_runs_there_and_one_on_gitlab_or_elsewhere_does_not():
    from codspeed_aggregator.domain.report import codspeed_page

    run = _snapshot().run
    assert codspeed_page("https://api.codspeed.io/upload", run) == "https://codspeed.io/acme/widgets"
    assert codspeed_page("https://codspeed.internal.example/upload", run) is None  # an on-premise instance: unknown
    run.provider = "GITLAB"
    assert codspeed_page("https://api.codspeed.io/upload", run) is None
    linked = build_report(_snapshot(), "now").model_copy(update={"codspeed_url": "https://codspeed.io/acme/widgets"})
    assert "Commit abc1234 · [CodSpeed](https://codspeed.io/acme/widgets)\n" in render_markdown(linked)


def test_a_pushed_shard_is_listed_once_for_each_executor_and_named_with_it():
    run = RunRecord(
        project="acme/widgets",
        run_id="43",
        groups={"": Manifest(total=2, indexed=True)},
        state=FORWARDED,
        variants=("|valgrind", "|walltime"),
        skipped=("2",),
        outcome=Outcome(carried={"2~walltime": CarriedShard(run_id="40", commit="abc", benchmarks=3)}),
    )
    shards = {
        "1": ShardRecord("1", "arrived", executor="valgrind", benchmarks=3),
        "1~walltime": ShardRecord("1~walltime", "arrived", executor="walltime", benchmarks=3),
    }
    report = build_report(Snapshot(run, shards), "now")
    assert [(s.name, s.display, s.state) for s in report.shards] == [
        ("1", None, "arrived"),
        ("1~walltime", "1 (walltime)", "arrived"),
        ("2", None, "skipped"),
        ("2~walltime", "2 (walltime)", "carried"),
    ]


def test_the_first_line_is_the_verdict_and_a_carried_shard_counts_as_in():
    from codspeed_wire.markdown import verdict
    from codspeed_wire.report import BenchmarkCounts, ShardEntry

    base = Report(
        project="a/b",
        run_id="r",
        state="open",
        partial=True,
        version=3,
        arrived=2,
        expected=3,
        generated_at="now",
        shards=[
            ShardEntry(name="1", state="arrived"),
            ShardEntry(name="2", state="carried"),
            ShardEntry(name="3", state="expected"),
        ],
        counts=BenchmarkCounts(measured=10, unchanged=10),
    )
    assert verdict(base) == "No change past 5% so far: 2 of 3 shards in"
    done = base.model_copy(
        update={
            "partial": False,
            "state": "forwarded",
            "counts": BenchmarkCounts(measured=10, unchanged=9, improvements=1),
        }
    )
    assert verdict(done) == "No regression past 5%, 1 improvement"


def test_a_parts_runs_shard_sent_upstream_says_so_and_a_re_run_not_sent_yet_does_not():
    snapshot = _snapshot()
    snapshot.shards["1"].upstream = ShardSent("abc", run_id="up-1", size=10, md5="m")
    snapshot.shards["2"] = ShardRecord("2", "arrived", benchmarks=1, arrived_at="2026-11-29T19:01:00Z")
    report = build_report(snapshot, "now")
    assert [(s.name, s.upstream) for s in report.shards if s.state == "arrived"] == [("1", True), ("2", False)]
    text = render_markdown(report)
    assert "| 1 | arrived, upstream | 2 |" in text and "| 2 | arrived |" in text


def test_the_comment_shows_a_shard_still_to_come_as_running_not_as_its_state_expected():
    markdown = render_markdown(build_report(_snapshot(), "now"))
    rows = [line for line in markdown.splitlines() if line.startswith("| 2 |") or line.startswith("| 4 |")]
    assert rows and all(row.split(" | ")[1] == "running" for row in rows), rows
    assert "| expected |" not in markdown


def test_a_shard_pushed_again_says_so_in_status():
    from codspeed_client.report import render_text

    text = render_text(build_report(_snapshot(), "now").model_dump())
    assert "pushed again: upload 2 of this attempt" in text and "running" in text


def test_the_regression_table_and_the_page_name_a_runner_jobs_shard_as_its_ci_shows_it_never_its_key():
    """Before: the table said the shard's key, ``benchmarks-shard-1-job-index-0-…\\!e958d9e6b7``, beside a
    shard table saying ``benchmarks [shard 1, job 1/4]``."""
    from codspeed_aggregator.pages.run_page import render_run
    from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry, ShardEntry

    key = "benchmarks-shard-1-job-index-0-job-total-4-executor-valgrind-run-index-0!e958d9e6b7"
    label = 'benchmarks-{"shard":1}-{"job-index":0,"job-total":4}-{"executor":"valgrind","run-index":0}'
    shard = ShardEntry(name=key, label=label, display="benchmarks [shard 1, job 1/4]", state="arrived")
    twice = BenchmarkEntry(
        name="bench_s1_0", shard=key, shards=[key, "2"], state="measured", unit="cycles", value=1200.0,
        baseline=1000.0, change=0.2, flag="regression",
    )  # fmt: skip
    report = Report(
        project="a/b", run_id="r", state="forwarded", partial=False, version=3, arrived=2,
        generated_at="2026-12-07T07:00:00Z",
        shards=[shard, ShardEntry(name="2", state="arrived")], benchmarks=[twice],
        counts=BenchmarkCounts(measured=1, regressions=1),
    )  # fmt: skip
    markdown, page = render_markdown(report), render_run(report, {}, None, None)
    assert "| bench\\_s1\\_0 | benchmarks \\[shard 1, job 1/4\\], 2 | +20.0% |" in markdown
    assert "benchmarks [shard 1, job 1/4], 2</td>" in page
    assert "e958d9e6b7" not in markdown and "e958d9e6b7</td>" not in page
