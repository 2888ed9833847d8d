"""How many instructions a second does a benchmark run at under CodSpeed's valgrind? The figure
``domain.costs`` turns a valgrind benchmark's recorded instructions into seconds with
(``VALGRIND_INSTRUCTIONS_PER_SECOND``), measured here instead of assumed: a pytest-codspeed suite
of pure-Python benchmarks of known, uneven work, run under callgrind with the runner's options
(as ``tests/fixtures/pytest_codspeed/make.sh`` records its folders), each benchmark's test time
taken from pytest's ``--durations`` and its instructions from the profile folder, as an arrival
reads them.

    python bench/valgrind_rate.py            # 6 benchmarks, 5e4 to 1e6 loop steps (about a minute)
    python bench/valgrind_rate.py --quick    # 4 light ones: a smoke for CI

pytest-codspeed runs in an environment of its own (``bench/balance.py``'s). A test's time holds
more than its counted run (pytest-codspeed's warm-up call, fixture set-up), so the rate is a
line fitted through (instructions, seconds): its slope is seconds per instruction, its intercept
what each benchmark costs besides. The last line reads ``valgrind_rate: measured=R assumed=A
ratio=X overhead_s=S`` (instructions a second; ratio: measured over assumed). Balancing needs
only the costs' proportions; the rate sets the seconds ``durations`` and ``split`` print.
"""

import argparse
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "bench")]

from balance import tools

from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.costs import VALGRIND_INSTRUCTIONS_PER_SECOND
from codspeed_aggregator.domain.results import measured

# the runner's callgrind options (CodSpeed's runner, as make.sh uses them)
VALGRIND = [
    "valgrind",
    "-q",
    "--tool=callgrind",
    "--trace-children=yes",
    "--cache-sim=yes",
    "--I1=32768,8,64",
    "--D1=32768,8,64",
    "--LL=8388608,16,64",
    "--instr-atstart=no",
    "--collect-systime=nsec",
    "--compress-strings=no",
    "--combine-dumps=yes",
    "--dump-line=no",
]
DURATION = re.compile(r"^\s*([0-9.]+)s call\s+(\S+)$", re.M)


def suite(folder: Path, steps: list[int]) -> None:
    folder.mkdir(parents=True)
    (folder / "test_work.py").write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.parametrize('steps', {steps})\n@pytest.mark.benchmark\n"
        "def test_work(steps):\n    total = 0\n    for i in range(steps):\n        total += i * i % 7\n    assert "
        "total >= 0\n"
    )


def run(python: Path, folder: Path, profiles: Path) -> dict[str, float]:
    """The suite under callgrind; each test's call time, by its test id (``test_work[100000]``)."""
    env = {
        **os.environ,
        "CODSPEED_ENV": "runner",
        "CODSPEED_RUNNER_MODE": "instrumentation",
        "CODSPEED_PROFILE_FOLDER": str(profiles),
        "PYTHONHASHSEED": "0",
    }
    done = subprocess.run(
        [
            *VALGRIND,
            f"--callgrind-out-file={profiles}/%p.out",
            f"--log-file={profiles}/valgrind.%p.log",
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=0",
            "--durations-min=0",
            "test_work.py",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise SystemExit(f"the suite failed under valgrind:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return {name.rsplit("::", 1)[1]: float(s) for s, name in DURATION.findall(done.stdout)}


def instructions(profiles: Path) -> dict[str, int]:
    """Each benchmark's instructions, by its test id, as an arrival records them from the folder's archive."""
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(profiles, arcname=".")
    packed.seek(0)
    kept = measured(validate_bundle(packed).results)
    return {name.rsplit("::", 1)[1]: r["instructions"] for name, r in kept.items()}


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of seconds on instructions: (seconds per instruction, seconds besides)."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4 light benchmarks")
    args = parser.parse_args()
    steps = (
        [20_000, 50_000, 100_000, 200_000] if args.quick else [50_000, 100_000, 200_000, 400_000, 700_000, 1_000_000]
    )
    python = tools(Path(tempfile.gettempdir()) / "codspeed-bench-tools")
    with tempfile.TemporaryDirectory(prefix="codspeed-valgrind-") as scratch:
        work, profiles = Path(scratch) / "suite", Path(scratch) / "profiles"
        suite(work, steps)
        profiles.mkdir()
        seconds = run(python, work, profiles)
        counted = instructions(profiles)
    points = []
    for name, ir in sorted(counted.items(), key=lambda kv: kv[1]):
        s = seconds.get(name)
        if s is None:
            print(f"  {name}: {ir} instructions, no call time in pytest's durations")
            continue
        points.append((ir, s))
        print(f"  {name}: {ir / 1e6:.1f} M instructions in {s:.2f} s of test time: {ir / s / 1e6:.1f} M a second")
    if len(points) < 2:
        print("valgrind_rate: fewer than two benchmarks timed: no fit")
        return 1
    slope, overhead = fit(points)
    rate = 1 / slope
    print(
        f"fitted over {len(points)} benchmarks: {rate / 1e6:.1f} M instructions a second, "
        f"{overhead:.2f} s per benchmark besides; domain.costs assumes {VALGRIND_INSTRUCTIONS_PER_SECOND / 1e6:.0f} M"
    )
    print(
        f"valgrind_rate: measured={rate:.3g} assumed={VALGRIND_INSTRUCTIONS_PER_SECOND:.3g} "
        f"ratio={rate / VALGRIND_INSTRUCTIONS_PER_SECOND:.2f} overhead_s={overhead:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
