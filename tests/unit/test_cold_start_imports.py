"""What each function loads at its cold start (``wiring.load``): the use cases it runs, none of the
others', and none of the adapters it never builds; bench/cold_start.py measures what that costs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
API_ONLY = {
    "request_upload",
    "runner_upload",
    "give_back_upload",
    "open_run",
    "close_run",
    "fork_pull_requests",
    "benchmark_costs",
}
FINALIZER_ONLY = {"finalize_run", "forward_shard", "forward_part", "plan_forward"}


def _loaded(handler: str) -> tuple[set[str], set[str]]:
    """The use cases and adapters importing ``handler`` loads, in a fresh interpreter."""
    code = (
        f"import sys, json, codspeed_aggregator.handlers.{handler}; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('codspeed_aggregator.'))))"
    )
    env = {"PYTHONPATH": str(FUNCTIONS), "AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    modules = json.loads(done.stdout)
    use_cases = {m.rsplit(".", 1)[1] for m in modules if m.startswith("codspeed_aggregator.use_cases.")}
    adapters = {m.split(".", 2)[2] for m in modules if m.startswith("codspeed_aggregator.adapters.")}
    return use_cases, adapters


@pytest.mark.parametrize(
    ("handler", "runs", "never", "no_adapters"),
    [
        ("api", {"request_upload", "close_run", "reports"}, FINALIZER_ONLY | {"record_arrival"}, {"upstream_http"}),
        ("arrivals", {"record_arrival", "reports"}, FINALIZER_ONLY | API_ONLY, {"ci_oidc", "upstream_http"}),
        ("finalizer", {"finalize_run", "forward_shard"}, API_ONLY, {"ci_oidc", "github_pulls"}),
    ],
)
def test_a_function_loads_at_its_cold_start_the_use_cases_it_runs_and_none_of_the_others(
    handler, runs, never, no_adapters
):
    use_cases, adapters = _loaded(handler)
    assert runs <= use_cases, runs - use_cases
    assert not never & use_cases, never & use_cases
    assert not no_adapters & adapters, no_adapters & adapters
