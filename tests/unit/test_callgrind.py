from hypothesis import given
from hypothesis import strategies as st

from codspeed_local.profiles import callgrind_text
from codspeed_rules.callgrind import BenchmarkScanner, PidRewriter, header_pid


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def test_header_pid_reads_the_pid_line():
    assert header_pid(callgrind_text(1234, ["a"]).encode()) == "1234"
    assert header_pid(b"# callgrind format\nversion: 1\n") is None


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_scanner_counts_triggers_however_the_stream_is_cut(cuts):
    names = [f"tests/test_x.py::test_{i}" for i in range(7)]
    data = callgrind_text(77, names, filler_lines=3).encode()
    scanner = BenchmarkScanner()
    for chunk in _chunks(data, cuts):
        scanner.feed(chunk)
    assert scanner.count == 7  # the Metadata trigger is not a benchmark
    assert scanner.names == names


@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_pid_rewriter_rewrites_every_pid_line_however_the_stream_is_cut(cuts):
    data = callgrind_text(4242, ["a", "b"], filler_lines=3).encode() + b"pid: 4242\nfn=x\n"
    data = data.replace(b"\npart: 2\n", b"\npart: 2\npid: 4242\n")  # a second part that repeats the pid
    rewriter = PidRewriter(4242, 4243)
    out = b"".join(rewriter.feed(c) for c in _chunks(data, cuts)) + rewriter.close()
    assert out == data.replace(b"\npid: 4242\n", b"\npid: 4243\n")
    assert b"pid: 4242" not in out and out.count(b"pid: 4243") == 3
