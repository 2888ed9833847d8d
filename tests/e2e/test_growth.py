"""A run's cost per arrival does not grow with the run: the load of bench/growth.py at 10 and
100 shards (1000 on demand: ``python bench/growth.py``), in a process of its own (its own
local stack), through the real handlers with small real bundles; in eager mode too (20 and 100),
each shard sent upstream as it is counted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # over 3 s each on a 2-core machine: left out of the quick loop (-m "not slow")

ROOT = Path(__file__).resolve().parents[2]


def test_requests_and_report_bytes_per_arrival_stay_flat_from_10_to_100_shards():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "growth.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    figures = dict(re.findall(r"(\w+)=([0-9.]+)", last))
    assert last.startswith("growth: shards=10->100"), last
    assert all(
        float(figures[k]) <= 1.2
        for k in ("arrival_requests_ratio", "rebuild_s3_bytes_ratio", "rebuild_dynamodb_bytes_ratio")
    ), last
    eager = [k for k in figures if k.startswith("eager_") and k.endswith("_ratio")]  # a run sent shard by shard
    assert len(eager) == 5 and all(float(figures[k]) <= 1.2 for k in eager), last
    assert float(figures["rebuild_cpu_seconds_max"]) < 1.0, last  # a partial report's rebuild, at 100 shards
    assert (
        "100 shards: requests per counted arrival (runner: dynamodb" in done.stdout
        and "packed: dynamodb" in done.stdout
    )
    spread = done.stdout.split("spread over 4 processes:", 1)[1]
    assert " 0 of " in spread.split("\n")[1], spread  # no rebuild after a process's first read the run whole
    # a process new to the run at its last batch: the last report's digest and the ledger as its publisher read it
    # and the baseline's (each listed, read), the batch's 10 results and their baseline's, the report published
    # (JSON, Markdown, digest, ledger); without the digest, one GET a shard more
    assert int(figures["late_rebuild_s3_requests"]) <= 30, last
    # and from DynamoDB no more than a steady rebuild: the records, tallies and shards changed since, never a run whole
    assert figures["late_rebuild_whole_reads"] == "0" and float(figures["late_rebuild_dynamodb_bytes_ratio"]) <= 1.2, (
        last
    )
