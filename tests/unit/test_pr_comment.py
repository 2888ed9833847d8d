"""The sticky comment's pull request, marker and body: within GitHub's 65,536 characters whatever
the run's size, the summary and the worst changes kept, the shard table cut first."""

from codspeed_aggregator.domain.pr_comment import BODY_LIMIT, Shown, comment_body, earlier_runs, marker
from codspeed_rules.names import pull_request
from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry, Report, ShardEntry


def test_the_pull_request_is_the_one_github_names_in_the_ref():
    assert pull_request("refs/pull/42/merge") == 42
    assert pull_request("refs/pull/7/head") == 7
    assert [pull_request(r) for r in (None, "", "refs/heads/main", "refs/pull/x/merge", "refs/pull/42/merge/x")] == [
        None
    ] * 5


def test_the_marker_names_the_pull_request_not_a_run():
    assert marker("acme/widgets", 42) == "<!-- codspeed-aggregator acme/widgets #42 -->"


def test_a_re_run_of_an_older_run_keeps_its_place_and_the_others_fold_into_one_line():
    runs = {
        "7001": {"opened": 100, "commit": "a" * 40, "url": "https://x.example/runs/7001"},
        "7002": {"opened": 200, "commit": "b" * 40, "url": None},
    }
    again = _big_report(1).model_copy(update={"run_id": "7001~2", "opened_at": "2030-01-01T00:00:00Z"})
    assert Shown.of(again, runs, now=0).opened == 100  # its run's first place, not the attempt's
    fresh = _big_report(1).model_copy(
        update={"run_id": "7003", "opened_at": "2030-01-01T00:00:00Z", "commit": "c" * 40}
    )
    shown = Shown.of(fresh, runs, now=0)
    assert shown.opened == 1893456000
    folded = earlier_runs({**runs, shown.run: shown.entry()}, shown)
    assert folded.count("\n- run ") == 2 and folded.index("run 7002") < folded.index("run 7001")  # newest first
    assert "[its report](https://x.example/runs/7001)" in folded and "7003" not in folded
    assert earlier_runs({shown.run: shown.entry()}, shown) == ""


def _big_report(shards: int) -> Report:
    long = "tests/test_a_module_with_a_long_path/test_something_parametrized"
    return Report(
        project="acme/widgets",
        run_id="7001",
        commit="a" * 40,
        state="forwarded",
        partial=False,
        version=9,
        expected=shards,
        arrived=shards,
        generated_at="t",
        shards=[
            ShardEntry(name=f"{long}-{i}", state="arrived", benchmarks=5000, reason="x" * 80) for i in range(shards)
        ],
        counts=BenchmarkCounts(
            measured=shards * 5000, regressions=60, improvements=3, unchanged=shards * 5000 - 63, worst_regression=0.41
        ),
        benchmarks=[
            BenchmarkEntry(
                name=f"{long}::bench_{i}[{'p' * 60}]",
                shard=f"{long}-{i}",
                value=100.0,
                baseline=80.0,
                change=0.25,
                flag="regression",
                unit="cycles",
                state="measured",
            )
            for i in range(50)
        ],
    )


def test_a_thousand_shards_fit_one_comment_with_the_summary_and_the_worst_changes_kept():
    report = _big_report(1000)
    body = comment_body(report, 42, earlier="\n\n<details>" + "x" * 5000 + "</details>")
    assert len(body) <= BODY_LIMIT
    assert body.startswith(marker("acme/widgets", 42) + "\n")
    assert "60 regressions (worst +41.0%), 3 improvements" in body
    assert body.count("bench\\_") + body.count("bench_") >= 30  # the worst changes listed
    assert "more shards on the run page" in body


def test_a_small_run_keeps_its_whole_shard_table():
    body = comment_body(_big_report(3), 42)
    assert "more shards" not in body and body.count("| arrived |") == 3
