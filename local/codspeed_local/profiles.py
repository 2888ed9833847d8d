"""Generated CodSpeed profile folders: for the demo, the tests and the benchmarks."""

import random
from pathlib import Path


def callgrind_text(
    pid: int, benchmarks: list[str], filler_lines: int = 20, seed: int = 0, costs: dict[str, int] | None = None
) -> str:
    """Callgrind text as valgrind writes it for pytest-codspeed: one part per benchmark, whose
    ``totals:`` line is its instruction count (``costs``, 1000 unless given)."""
    rng = random.Random(seed or pid)
    parts = [
        "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\n"
        f"pid: {pid}\ncmd:  python -m pytest --codspeed\npart: 1\n\n"
        "desc: I1 cache:\ndesc: Trigger: Client Request: Metadata: pytest-codspeed 3.2.0\n\n"
        "positions: line\nevents: Ir\nsummary: 100\ntotals: 100\n\nfl=(1) conftest.py\nfn=(1) setup\n1 100\n"
    ]
    for number, name in enumerate(benchmarks, start=2):
        body = "\n".join(
            f"{rng.randint(1, 5000)} {rng.randint(1, 10**6)}\ncalls=1 {rng.randint(1, 400)}"
            for _ in range(filler_lines)
        )
        parts.append(
            f"\npart: {number}\n\ndesc: I1 cache:\ndesc: Trigger: Client Request: {name}\n\n"
            f"positions: line\nevents: Ir\nsummary: {(costs or {}).get(name, 1000)}\ntotals: "
            f"{(costs or {}).get(name, 1000)}"
            f"\n\nfl=(2) bench.py\nfn=(2) {name.split('::')[-1]}\n{body}\n"
        )
    return "".join(parts)


def make_profile_folder(
    folder: Path,
    pid: int,
    benchmarks: list[str],
    *,
    filler_lines: int = 20,
    extra_pids: tuple[int, ...] = (),
    costs: dict[str, int] | None = None,
) -> Path:
    """A folder as pytest-codspeed leaves it: ``<pid>.out``, ``perf-<pid>.map``, logs, results."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, p in enumerate((pid, *extra_pids)):
        own = benchmarks if index == 0 else [f"{b}[child]" for b in benchmarks[:1]]
        (folder / f"{p}.out").write_text(callgrind_text(p, own, filler_lines, costs=costs))
        (folder / f"perf-{p}.map").write_text(f"7f00000000 100 bench_fn_{p}\n")
        (folder / f"valgrind.{p}.log").write_text(f"=={p}== Callgrind, a call-graph generating cache profiler\n")
    (folder / "results").mkdir(exist_ok=True)
    (folder / "results" / f"{pid}.json").write_text(f'{{"pid": {pid}, "benchmarks": {len(benchmarks)}}}\n')
    (folder / "runner.log").write_text("codspeed runner log\n")
    return folder
