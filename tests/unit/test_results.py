"""Per-benchmark results: read from real profiles in the validating pass, compared with a baseline."""

import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.results import (
    LISTED,
    ShardResults,
    SummaryDigest,
    absent_entries,
    combine,
    measured,
    merged,
    shard_entries,
    summarize,
)
from codspeed_rules.callgrind import BenchmarkScanner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pytest_codspeed"


def _out_of(archive: Path) -> bytes:
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".out"))
        return tar.extractfile(member).read()


def test_a_real_valgrind_shard_gives_each_benchmark_its_totals_and_estimated_cycles():
    with open(FIXTURES / "valgrind-shard-1.tar.gz", "rb") as stream:
        summary = validate_bundle(stream)
    [(name, costs)] = summary.results.items()
    assert name.endswith("test_bench.py::test_fib_10")
    assert costs == {
        "Ir": 148928,
        "Dr": 43647,
        "Dw": 26802,
        "I1mr": 1189,
        "D1mr": 1015,
        "D1mw": 318,
        "ILmr": 881,
        "DLmr": 830,
        "DLmw": 253,
    }
    kept = measured(summary.results)[name]
    assert kept == {
        "unit": "cycles",
        "instructions": 148928,
        "l1_misses": 1189 + 1015 + 318,
        "ll_misses": 881 + 830 + 253,
        "value": 148928 + 10 * (1189 + 1015 + 318) + 100 * (881 + 830 + 253),
    }


def test_a_real_walltime_shard_gives_each_benchmark_its_mean_spread_and_total_time():
    with open(FIXTURES / "walltime-shard-1.tar", "rb") as stream:
        summary = validate_bundle(stream, "walltime")
    assert len(summary.results) == 3
    fib = next(v for k, v in summary.results.items() if k.endswith("::test_fib_10"))
    assert fib["rounds"] == 2993 and fib["mean_ns"] == pytest.approx(8466.14, abs=0.01)
    assert measured({"t": fib})["t"] == {
        "unit": "ns",
        "value": fib["mean_ns"],
        "stdev_ns": fib["stdev_ns"],
        "total_s": pytest.approx(3.977266),
    }  # what it took to run: what shards balance on
    assert fib["warmup_time_ns"] == 1_000_000_000  # pytest-codspeed's warm-up budget, from the benchmark's config


@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(min_value=7, max_value=4096), min_size=1, max_size=40))
def test_the_scanner_finds_the_same_costs_however_the_file_is_cut(cuts):
    data = _out_of(FIXTURES / "valgrind-shard-2.tar.gz")
    scanner, position = BenchmarkScanner(), 0
    for size in cuts * (len(data) // sum(cuts) + 1):
        scanner.feed(data[position : position + size])
        position += size
        if position >= len(data):
            break
    whole = BenchmarkScanner()
    whole.feed(data)
    assert (scanner.count, scanner.names, scanner.costs) == (whole.count, whole.names, whole.costs) != (0, [], {})


def test_past_the_kept_names_benchmarks_are_still_counted():
    text = b"".join(b"\ndesc: Trigger: Client Request: t::%d\nevents: Ir\ntotals: %d\n" % (i, i) for i in range(8))
    scanner = BenchmarkScanner(keep_names=3)
    scanner.feed(b"# callgrind format\n" + text)
    assert scanner.count == 8 and scanner.names == ["t::0", "t::1", "t::2"] and list(scanner.costs) == scanner.names


def _c(value, unit="cycles"):
    return {"unit": unit, "value": value}


BEFORE = {"a": _c(1000), "b": _c(1000), "c": _c(1000), "f": _c(100)}
SHARD = {"a": _c(1300), "b": _c(900), "c": _c(1040), "g": _c(5)}


def test_a_shards_changes_past_the_threshold_are_flagged_regressions_first_improvements_last():
    entries = shard_entries("1", SHARD, BEFORE, 0.05)
    by_name = {e.name: e for e in entries}
    assert [e.name for e in entries] == ["a", "c", "g", "b"]
    assert (by_name["a"].flag, round(by_name["a"].change, 2)) == ("regression", 0.3)
    assert (by_name["b"].flag, round(by_name["b"].change, 2)) == ("improvement", -0.1)
    assert by_name["c"].flag is None and round(by_name["c"].change, 2) == 0.04  # under 5%
    assert by_name["g"].baseline is None and by_name["g"].flag is None  # new: nothing to compare with


def test_a_summary_counts_every_benchmark_and_names_the_same_changes_as_the_full_list():
    summary = summarize("1", SHARD, BEFORE, 0.05)
    assert dict(summary.counts) == {"measured": 4, "regressions": 1, "improvements": 1, "unchanged": 1, "new": 1}
    full = {e.name: e for e in shard_entries("1", SHARD, BEFORE, 0.05)}
    assert [e.name for e in summary.regressions] == ["a"] and summary.regressions[0] == full["a"]
    assert [e.name for e in summary.improvements] == ["b"] and summary.improvements[0] == full["b"]


def test_a_runs_summary_keeps_the_worst_changes_of_all_its_shards_and_counts_the_rest():
    many = {f"t{i}": _c(1000 + 10 * i) for i in range(200)}
    summaries = [
        summarize(str(n), {k: _c(v["value"] * (1 + n / 10)) for k, v in many.items()}, many, 0.05) for n in range(1, 4)
    ]
    counts, listed = combine(merged(summaries), carried=7, running=3, missing=2)
    assert (
        counts.measured == 600
        and counts.regressions == 600
        and (counts.carried, counts.running, counts.missing) == (7, 3, 2)
    )
    assert len(listed) == LISTED and all(e.shard == "3" for e in listed)  # the worst: shard 3's +30%
    assert counts.worst_regression == pytest.approx(0.3) and counts.worst_improvement is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from([f"t{i}" for i in range(120)]), st.integers(1, 3000), max_size=120),
        min_size=1,
        max_size=6,
    ),
    st.integers(0, 6),
)
def test_a_digest_of_some_shards_merged_with_the_others_is_the_summary_of_them_all(shards, split):
    """What a cold process does: the published digest (its shards merged, through its JSON) merged
    with the shards it does not cover gives the report what every shard's summary would."""
    base = {f"t{i}": _c(1000) for i in range(120)}
    summaries = [
        summarize(str(n), {k: _c(v) for k, v in figures.items()}, base, 0.05) for n, figures in enumerate(shards)
    ]
    covered, rest = summaries[:split], summaries[split:]
    digest = SummaryDigest(frozenset(f"k{n}" for n in range(len(covered))), "main-1", 0.05, merged(covered))
    again = SummaryDigest.from_json(digest.to_json())
    assert again == digest
    assert combine(merged([again.summary, *rest])) == combine(merged(summaries))


def test_a_digest_covers_a_run_only_at_its_baseline_and_threshold_and_while_it_counts_every_bundle_it_did():
    digest = SummaryDigest(frozenset({"a", "b"}), "main-1", 0.05, merged([]))
    assert digest.covers({"a", "b", "c"}, "main-1", 0.05)
    assert not digest.covers(
        {"a", "c"}, "main-1", 0.05
    )  # b's shard uploaded again: its results are no longer the run's
    assert not digest.covers({"a", "b"}, "main-2", 0.05) and not digest.covers({"a", "b"}, "main-1", 0.1)


def test_the_baselines_benchmarks_of_an_absent_shard_say_where_they_stand():
    [carried] = absent_entries("3", {"d": {**_c(500), "instructions": 400}}, "carried", "carried from run main-1")
    assert (carried.state, carried.value, carried.instructions, carried.source) == (
        "carried",
        500,
        400,
        "carried from run main-1",
    )
    [running] = absent_entries("4", {"e": _c(700)}, "running", "run main-1")
    assert (running.state, running.value, running.baseline) == ("running", None, 700)


def test_a_walltime_figure_is_never_compared_with_a_cycles_one():
    [entry] = shard_entries("1", {"a": _c(2000.0, "ns")}, {"a": _c(1000)}, 0.05)
    assert entry.baseline is None and entry.change is None and entry.flag is None
    assert summarize("1", {"a": _c(2000.0, "ns")}, {"a": _c(1000)}, 0.05).counts["new"] == 1


def test_results_round_trip_as_the_bucket_keeps_them():
    kept = ShardResults(["a", "b"], {"a": _c(1.5)})
    assert ShardResults.from_json(kept.to_json()) == kept


def test_a_benchmark_measured_by_two_shards_counts_once_at_its_worst_change_naming_both():
    """The case seen: three benchmarks at +12% held by linter and codegen read "6 regressions"
    everywhere a headline counts, and the worst list named each twice."""
    from codspeed_aggregator.domain.results import Twin, counted_once, merged, summarize

    same = {f"t::{i}": {"unit": "cycles", "value": 112.0} for i in range(3)}
    before = {name: {"unit": "cycles", "value": 100.0} for name in same}
    linter = summarize(
        "linter",
        {**same, "t::own": {"unit": "cycles", "value": 90.0}},
        before | {"t::own": {"unit": "cycles", "value": 100.0}},
        0.05,
    )
    codegen = summarize("codegen", {**same, "t::new": {"unit": "cycles", "value": 5.0}}, before, 0.05)
    both = merged([linter, codegen])
    assert (both.counts["regressions"], both.counts["measured"]) == (6, 8)  # what the headline said
    twins = [Twin(name, {"linter": 0.12, "codegen": 0.12}) for name in same]
    once = counted_once(both, twins, 0.05)
    assert dict(once.counts) == {"measured": 5, "regressions": 3, "improvements": 1, "new": 1}
    assert [(e.name, e.shards) for e in once.regressions] == [(n, ["codegen", "linter"]) for n in sorted(same)]
    assert [e.name for e in once.improvements] == ["t::own"] and once.improvements[0].shards == []
    assert dict(both.counts)["regressions"] == 6  # the summary merged is left as it was: shards may come again


def test_a_twin_improved_in_one_shard_and_regressed_in_another_counts_once_as_its_regression():
    from codspeed_aggregator.domain.results import Twin, counted_once, merged, summarize

    before = {"t::x": {"unit": "cycles", "value": 100.0}}
    a = summarize("a", {"t::x": {"unit": "cycles", "value": 80.0}}, before, 0.05)
    b = summarize("b", {"t::x": {"unit": "cycles", "value": 130.0}}, before, 0.05)
    once = counted_once(merged([a, b]), [Twin("t::x", {"a": -0.2, "b": 0.3})], 0.05)
    assert dict(once.counts) == {"measured": 1, "regressions": 1, "improvements": 0}
    assert [(e.shard, e.shards) for e in once.regressions] == [("b", ["a", "b"])] and once.improvements == []
    assert Twin("t::y", {"a": None, "b": -0.5}).worst == "b"  # a new one's change is the least
