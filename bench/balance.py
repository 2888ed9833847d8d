"""Do shards balanced on recorded costs finish together? Measured on real time, not on the
costs being balanced: a fixed pytest-codspeed suite of benchmarks of deliberately uneven cost
(walltime mode, so it stays cheap; a warm-up of 0.2 s and 3 rounds each), recorded once as
main's run through the local stack, its costs exported by ``codspeed-client durations``, then
run as 3 groups split by pytest-split (``--splitting-algorithm least_duration``) from those
durations, against pytest-split's default split with no durations (``duration_based_chunks``:
consecutive tests, an even split by count).

The recorded costs are checked against what pytest itself measured of each benchmark's test in
the recording session (``--durations=0``: its call, pytest-codspeed's first call, warm-up and
rounds included): ``costs: recorded/pytest median=R min=R max=R``.

    python bench/balance.py            # 40 benchmarks, 3 rounds each
    python bench/balance.py --quick    # 16 benchmarks: a smoke for CI

pytest-codspeed and pytest-split run in an environment of their own (made once under the temp
folder, from the package index), as in a user's CI: neither is a dependency of the aggregator
or of its tests. Each group's time is pytest's own session time ("passed in X s"), without the
interpreter's start-up. The last line reads ``balance: groups=4 balanced=R by_count=R`` (the
slowest group's time over the groups' mean; target: balanced <= 1.25, and below by count).
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from codspeed_local.stack import LocalStack
from tests.factories import wait_for

GROUPS, TARGET = 3, 1.25
COST_TOLERANCE = 1.25  # each recorded cost within this factor of pytest's own measure
TOOLS = ["pytest>=8", "pytest-codspeed>=4", "pytest-split>=0.9"]
PROJECT = "acme/balance"
WALLTIME = ["--codspeed", "--codspeed-warmup-time", "0.2", "--codspeed-max-rounds", "3"]


def tools(venvs: Path) -> Path:
    """A Python with pytest-codspeed and pytest-split (made once)."""
    python = venvs / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venvs)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *TOOLS], check=True
        )
    return python


def suite(folder: Path, count: int) -> None:
    """``count`` benchmarks whose costs spread over two orders of magnitude (a few heavy, many
    light, as real suites are), in a git checkout: pytest-codspeed names each by its node id."""
    costs = [round(10 + 200 * random.Random(i).random() ** 2) for i in range(count)]  # in no particular order
    folder.mkdir(parents=True)
    (folder / "test_uneven.py").write_text(
        "import time\nimport pytest\n\n\n"
        f"@pytest.mark.parametrize('ms', {costs})\n@pytest.mark.benchmark\n"
        "def test_cost(ms):\n    time.sleep(ms / 1000)\n"
    )
    subprocess.run(["git", "init", "-q", str(folder)], check=True)


def pytest(python: Path, folder: Path, *args: str, env: dict | None = None) -> tuple[float, str]:
    """One pytest session over the suite: its own time in seconds, and what it printed."""
    # --rootdir: pytest takes any path among its arguments (a durations file's) for where node ids start
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", ".", *WALLTIME, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=900,
    )
    if done.returncode not in (0, 5):  # 5: a group with no test
        raise SystemExit(f"pytest failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    found = re.search(r"in ([0-9.]+)s", done.stdout.splitlines()[-1]) if done.stdout.strip() else None
    return (float(found.group(1)) if found else 0.0), done.stdout


def call_times(printed: str) -> dict[str, float]:
    """Each test's call time from pytest's ``--durations=0`` lines ("0.52s call     test_uneven.py::test_cost[120]")."""
    return {node: float(seconds) for seconds, node in re.findall(r"^([0-9.]+)s call\s+(\S+)$", printed, re.M)}


def client(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": stack.token}
    done = subprocess.run(
        [sys.executable, "-m", "codspeed_client.cli", *args, "--project", PROJECT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise SystemExit(f"codspeed-client {args[0]} failed: {done.stderr}")
    return done


def spread(times: list[float]) -> float:
    return max(times) / (sum(times) / len(times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="16 benchmarks")
    args = parser.parse_args()
    count = 16 if args.quick else 40
    with tempfile.TemporaryDirectory(prefix="bench-balance-") as tmp, LocalStack() as stack:
        tmp = Path(tmp)
        python, folder = tools(tmp / "tools"), tmp / "suite"
        suite(folder, count)
        profiles = tmp / "profiles"
        recorded, printed = pytest(
            python,
            folder,
            "--durations=0",
            "--durations-min=0",
            env={
                "CODSPEED_ENV": "runner",
                "CODSPEED_RUNNER_MODE": "walltime",
                "CODSPEED_PROFILE_FOLDER": str(profiles),
            },
        )
        client(
            stack,
            "push",
            "--shard",
            "1/1",
            "--profile-folder",
            str(profiles),
            "--executor",
            "walltime",
            "--run-id",
            "main-1",
            "--commit",
            "1" * 40,
            "--ref",
            "refs/heads/main",
        )
        wait_for(
            lambda: "forwarded" in client(stack, "status", "--run-id", "main-1", "--format", "json").stdout, timeout=120
        )
        durations = folder / ".test_durations"  # pytest-split's own place for it
        client(stack, "durations", "-o", str(durations))
        recorded_costs = json.loads(durations.read_text())
        assert len(recorded_costs) == count, recorded_costs
        measured = call_times(printed)
        ratios = sorted(recorded_costs[name] / measured[name] for name in recorded_costs)
        empty = folder / "none.json"
        empty.write_text("{}")
        times = {}
        for split, path, algorithm in (
            ("balanced", durations, "least_duration"),
            ("by_count", empty, "duration_based_chunks"),
        ):  # pytest-split's default
            times[split] = [
                pytest(
                    python,
                    folder,
                    "--splits",
                    str(GROUPS),
                    "--group",
                    str(g),
                    "--durations-path",
                    str(path),
                    "--splitting-algorithm",
                    algorithm,
                )[0]
                for g in range(1, GROUPS + 1)
            ]
    print(
        f"{count} benchmarks, {recorded:.2f} s in one session (its costs recorded through the local stack and "
        f"exported by codspeed-client durations); {GROUPS} groups by pytest-split:"
    )
    for split, group_times in times.items():
        print(
            f"  {split}: "
            + ", ".join(f"{t:.2f} s" for t in group_times)
            + f"; slowest over mean {spread(group_times):.2f}"
        )
    median = ratios[len(ratios) // 2]
    print(
        f"costs: recorded/pytest median={median:.2f} min={ratios[0]:.2f} max={ratios[-1]:.2f} "
        f"(each benchmark's recorded cost over its test's call time in pytest's --durations)"
    )
    balanced, by_count = spread(times["balanced"]), spread(times["by_count"])
    print(f"balance: groups={GROUPS} balanced={balanced:.2f} by_count={by_count:.2f}")
    missed = balanced > TARGET or balanced >= by_count
    if missed:
        print(f"  balance MISSED: balanced over {TARGET} or not below by count")
    if not 1 / COST_TOLERANCE <= ratios[0] <= ratios[-1] <= COST_TOLERANCE:
        print(f"  costs MISSED: a recorded cost beyond {COST_TOLERANCE}x of pytest's measure")
        missed = True
    return 1 if missed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
