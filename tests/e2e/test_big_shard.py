"""A shard of 30,000 benchmarks through the local stack: its page is over Lambda's 6 MB answer
as JSON, and reaches the client gzipped (the gateway holds handlers to the 6 MB), the
report stays a summary, and the real client lists every benchmark."""

import json
import os
import subprocess
import sys
import uuid

import requests

from tests.factories import bundle, put, upload_request, wait_for

BENCHMARKS = 30_000


def _get(stack, path: str, **headers) -> requests.Response:
    return requests.get(f"{stack.api_url}{path}", timeout=60, headers={"Authorization": stack.token, **headers})


def test_a_shard_page_over_lambdas_answer_is_gzipped_and_the_client_lists_every_benchmark(stack):
    project, run_id = f"acme/big-{uuid.uuid4().hex[:6]}", "run-1"
    names = [f"tests/test_{'long_module_name_' * 3}{i // 100}.py::test_case_number_{i}" for i in range(BENCHMARKS)]
    data = bundle(4242, names, filler_lines=1)
    grant = requests.post(f"{stack.api_url}/v1/uploads", json=upload_request(project, run_id, "1", data, total=2),
                          headers={"Authorization": stack.token}, timeout=30)
    put(grant.json(), data)
    report = wait_for(lambda: (r := _get(stack, f"/v1/runs/{project}/{run_id}").json()).get("arrived") == 1 and r, timeout=120)
    assert report["counts"]["measured"] == BENCHMARKS and len(json.dumps(report)) < 20_000

    page = _get(stack, f"/v1/runs/{project}/{run_id}?shard=1")  # requests asks for gzip, as the client does
    assert page.status_code == 200 and page.headers["Content-Encoding"] == "gzip"
    assert len(page.content) > 6 * 1024 * 1024 and len(page.json()["benchmarks"]) == BENCHMARKS  # decoded: over 6 MB
    plain = _get(stack, f"/v1/runs/{project}/{run_id}?shard=1", **{"Accept-Encoding": "identity"})
    assert plain.status_code == 500  # as API Gateway answers a Lambda response over 6 MB

    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "BUILDKITE"))},
           "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": stack.token}
    shown = subprocess.run([sys.executable, "-m", "codspeed_client.cli", "status", "--format", "json", "--benchmarks",
                            "--project", project, "--run-id", run_id, "--commit", "a" * 40],
                           env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert sorted(b["name"] for b in json.loads(shown.stdout)["benchmarks"]) == sorted(names)
