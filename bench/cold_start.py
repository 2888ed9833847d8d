"""What each function's handler costs to import at a cold start, against what its libraries cost.

    python bench/cold_start.py            # 15 alternated runs a function
    python bench/cold_start.py --quick    # 5: a smoke for CI (make bench-smoke), figures printed

Each function's package is built as ``sam build`` builds it (functions/function_package.py: the modules
its handler reaches, the libraries they import at functions/requirements.txt's pins, bytecode compiled
by Python 3.11 with unchecked hashes), for this machine's platform. Each import runs in a fresh, clean
Python of the template's runtime (``-I -S -B``: the package alone on ``sys.path``, nothing written),
with the bytecode as shipped. Its floor is the same package's ``import boto3, pydantic`` and
powertools' ``Logger``: what any function of this stack loads. Function and floor take turns, and the
medians are compared: ratio = handler import / floor (target <= 1.5, held by a full run).
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"
sys.path.insert(0, str(FUNCTIONS))
from function_package import compile_bytecode, copy_modules  # noqa: E402 -- a build script, not a package

HANDLERS = {
    "ApiFunction": "codspeed_aggregator.handlers.api",
    "ArrivalsFunction": "codspeed_aggregator.handlers.arrivals",
    "FinalizerFunction": "codspeed_aggregator.handlers.finalizer",
    "SweeperFunction": "codspeed_aggregator.handlers.sweeper",
}
FLOOR = "import boto3, pydantic; from aws_lambda_powertools import Logger"
TARGET = 1.5


def build(handler: str, target: Path) -> None:
    """The package as sam build makes it, for this platform (the wheels for Lambda's are arm64)."""
    wanted = copy_modules(handler, target)
    pins = ("--constraint", str(FUNCTIONS / "requirements.txt"))
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--only-binary=:all:"]
    subprocess.run([*install, *pins, "--target", str(target), *wanted], check=True)
    if not compile_bytecode(target, sys.executable):
        raise SystemExit("cold_start.py: run it with Python 3.11, the template's runtime")


def timed(package: Path, statement: str) -> float:
    """Seconds ``statement`` takes in a fresh, clean interpreter whose path is the package alone."""
    code = (
        f"import sys, time; sys.path[:0] = [{str(package)!r}]; t = time.perf_counter(); {statement}; "
        "print(time.perf_counter() - t)"
    )
    env = {"AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_SERVICE_NAME": "bench", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"cold_start.py: {statement} failed in {package}:\n{done.stderr[-2000:]}")
    return float(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 5 if args.quick else 15
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for function, handler in HANDLERS.items():
            package = Path(tmp) / function
            build(handler, package)
            timed(package, FLOOR)  # the first run reads the files from disk: not counted
            imports, floors = [], []
            for turn in range(runs):
                pair = [(imports, f"import {handler}"), (floors, FLOOR)]
                for into, statement in pair if turn % 2 == 0 else reversed(pair):
                    into.append(timed(package, statement))
            ratio = statistics.median(imports) / statistics.median(floors)
            worst = max(worst, ratio)
            modules = sum(1 for _ in package.rglob("*.pyc"))
            handler_ms, floor_ms = statistics.median(imports) * 1000, statistics.median(floors) * 1000
            print(
                f"{function}: import {handler_ms:.0f} ms, floor {floor_ms:.0f} ms, ratio {ratio:.2f} "
                f"({runs} runs each, alternated; {modules} modules compiled)"
            )
    print(f"cold_start: worst_ratio={worst:.2f} target={TARGET}")
    return 1 if worst > TARGET and not args.quick else 0  # the smoke prints; a full run holds the target


if __name__ == "__main__":
    sys.exit(main())
