"""The sticky comment's pull request, marker and body: within GitHub's 65,536 characters whatever
the run's size, the summary and the worst changes kept, the shard table cut first."""

from codspeed_aggregator.domain.pr_comment import BODY_LIMIT, comment_body, marker
from codspeed_rules.names import pull_request
from codspeed_wire.report import BenchmarkCounts, BenchmarkEntry, Report, ShardEntry


def test_the_pull_request_is_the_one_github_names_in_the_ref():
    assert pull_request("refs/pull/42/merge") == 42
    assert pull_request("refs/pull/7/head") == 7
    assert [pull_request(r) for r in (None, "", "refs/heads/main", "refs/pull/x/merge", "refs/pull/42/merge/x")] \
        == [None] * 5


def test_every_attempt_of_a_run_shares_its_marker():
    assert marker("acme/widgets", "7001~3") == marker("acme/widgets", "7001") == "<!-- codspeed-aggregator acme/widgets 7001 -->"


def _big_report(shards: int) -> Report:
    long = "tests/test_a_module_with_a_long_path/test_something_parametrized"
    return Report(
        project="acme/widgets", run_id="7001", commit="a" * 40, state="forwarded", partial=False, version=9,
        expected=shards, arrived=shards, generated_at="t",
        shards=[ShardEntry(name=f"{long}-{i}", state="arrived", benchmarks=5000, reason="x" * 80) for i in range(shards)],
        counts=BenchmarkCounts(measured=shards * 5000, regressions=60, improvements=3, unchanged=shards * 5000 - 63,
                               worst_regression=0.41),
        benchmarks=[BenchmarkEntry(name=f"{long}::bench_{i}[{'p' * 60}]", shard=f"{long}-{i}", value=100.0, baseline=80.0,
                                   change=0.25, flag="regression", unit="cycles", state="measured") for i in range(50)])


def test_a_thousand_shards_fit_one_comment_with_the_summary_and_the_worst_changes_kept():
    report = _big_report(1000)
    body = comment_body(report)
    assert len(body) <= BODY_LIMIT
    assert body.startswith(marker("acme/widgets", "7001") + "\n")
    assert "60 regressions (worst +41.0%), 3 improvements" in body
    assert body.count("bench\\_") + body.count("bench_") >= 30  # the worst changes listed
    assert "more shards on the run page" in body


def test_a_small_run_keeps_its_whole_shard_table():
    body = comment_body(_big_report(3))
    assert "more shards" not in body and body.count("| arrived |") == 3
