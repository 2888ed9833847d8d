"""Per-benchmark results: read from real profiles in the validating pass, compared with a baseline."""

import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.results import compare, measured
from codspeed_rules.callgrind import BenchmarkScanner
from codspeed_wire.report import BenchmarkEntry

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
    assert costs == {"Ir": 148928, "Dr": 43647, "Dw": 26802, "I1mr": 1189, "D1mr": 1015, "D1mw": 318,
                     "ILmr": 881, "DLmr": 830, "DLmw": 253}
    kept = measured(summary.results)[name]
    assert kept == {"unit": "cycles", "instructions": 148928, "l1_misses": 1189 + 1015 + 318,
                    "ll_misses": 881 + 830 + 253, "value": 148928 + 10 * (1189 + 1015 + 318) + 100 * (881 + 830 + 253)}


def test_a_real_walltime_shard_gives_each_benchmark_its_mean_and_spread():
    with open(FIXTURES / "walltime-shard-1.tar", "rb") as stream:
        summary = validate_bundle(stream, "walltime")
    assert len(summary.results) == 3
    fib = next(v for k, v in summary.results.items() if k.endswith("::test_fib_10"))
    assert fib["rounds"] == 2993 and fib["mean_ns"] == pytest.approx(8466.14, abs=0.01)
    assert measured({"t": fib})["t"] == {"unit": "ns", "value": fib["mean_ns"], "stdev_ns": fib["stdev_ns"]}


@settings(deadline=None, max_examples=50)
@given(st.lists(st.integers(min_value=7, max_value=4096), min_size=1, max_size=40))
def test_the_scanner_finds_the_same_costs_however_the_file_is_cut(cuts):
    data = _out_of(FIXTURES / "valgrind-shard-2.tar.gz")
    scanner, position = BenchmarkScanner(), 0
    for size in cuts * (len(data) // sum(cuts) + 1):
        scanner.feed(data[position:position + size])
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


def _base(name, shard, value, unit="cycles"):
    return BenchmarkEntry(name=name, shard=shard, state="measured", unit=unit, value=value)


def test_changes_past_the_threshold_are_flagged_regressions_first_and_absent_ones_say_where_they_are():
    baseline = [_base("a", "1", 1000), _base("b", "1", 1000), _base("c", "2", 1000), _base("d", "3", 500),
                _base("e", "4", 700), _base("f", "1", 100)]
    shards = {"1": {"a": {"unit": "cycles", "value": 1300}, "b": {"unit": "cycles", "value": 900},
                    "g": {"unit": "cycles", "value": 5}},
              "2": {"c": {"unit": "cycles", "value": 1040}}}
    entries = compare(shards, True, {"3": "carried from run main-1"}, baseline, "run main-1", 0.05)
    by_name = {e.name: e for e in entries}
    assert [e.name for e in entries][:1] == ["a"] and entries[-1].name == "b"  # regression first, improvement last
    assert (by_name["a"].flag, round(by_name["a"].change, 2)) == ("regression", 0.3)
    assert (by_name["b"].flag, round(by_name["b"].change, 2)) == ("improvement", -0.1)
    assert by_name["c"].flag is None and round(by_name["c"].change, 2) == 0.04  # under 5%
    assert (by_name["d"].state, by_name["d"].value, by_name["d"].source) == ("carried", 500, "carried from run main-1")
    assert (by_name["e"].state, by_name["e"].baseline) == ("running", 700)  # shard 4 is not in yet
    assert (by_name["f"].state, by_name["f"].source) == ("missing", "run main-1")  # its shard came without it
    assert by_name["g"].baseline is None and by_name["g"].flag is None  # new: nothing to compare with
    closed = {e.name: e.state for e in compare(shards, False, {}, baseline, "run main-1", 0.05)}
    assert closed["e"] == "missing" and closed["d"] == "missing"


def test_a_walltime_figure_is_never_compared_with_a_cycles_one():
    [entry] = compare({"1": {"a": {"unit": "ns", "value": 2000.0}}}, False, {}, [_base("a", "1", 1000)], None, 0.05)
    assert entry.baseline is None and entry.change is None and entry.flag is None
