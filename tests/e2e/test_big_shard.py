"""A shard of 30,000 benchmarks through the local stack: its page is over Lambda's 6 MB answer
as JSON (the gateway holds handlers to the 6 MB, as API Gateway does), so it is answered 303 to
a presigned copy in S3 whatever the request accepts; the report stays a summary, and the real
client lists every benchmark."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import requests

from tests.factories import bundle, put, upload_request, wait_for

BENCHMARKS = 30_000


def _get(stack, path: str, **headers) -> requests.Response:
    return requests.get(f"{stack.api_url}{path}", timeout=60, headers={"Authorization": stack.token, **headers})


@pytest.mark.slow
def test_a_shard_page_over_lambdas_answer_comes_from_s3_and_the_client_lists_every_benchmark(stack):
    project, run_id = f"acme/big-{uuid.uuid4().hex[:6]}", "run-1"
    names = [f"tests/test_{'long_module_name_' * 3}{i // 100}.py::test_case_number_{i}" for i in range(BENCHMARKS)]
    data = bundle(4242, names, filler_lines=1)
    grant = requests.post(
        f"{stack.api_url}/v1/uploads",
        json=upload_request(project, run_id, "1", data, total=2),
        headers={"Authorization": stack.token},
        timeout=30,
    )
    put(grant.json(), data)
    report = wait_for(
        lambda: (r := _get(stack, f"/v1/runs/{project}/{run_id}").json()).get("arrived") == 1 and r, timeout=120
    )
    assert report["counts"]["measured"] == BENCHMARKS and len(json.dumps(report)) < 20_000

    for encoding in ("gzip, deflate", "identity"):  # gzipped, it would fit; plain, it was a 500
        page = requests.get(
            f"{stack.api_url}/v1/runs/{project}/{run_id}?shard=1",
            allow_redirects=False,
            timeout=60,
            headers={"Authorization": stack.token, "Accept-Encoding": encoding},
        )
        assert page.status_code == 303 and "X-Amz-Signature=" in page.headers["Location"], page.text[:300]
    followed = requests.get(page.headers["Location"], timeout=60)
    assert len(followed.content) > 6 * 1024 * 1024 and len(followed.json()["benchmarks"]) == BENCHMARKS

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "BUILDKITE"))},
        "CODSPEED_AGGREGATOR_URL": stack.api_url,
        "CODSPEED_AGGREGATOR_TOKEN": stack.token,
    }
    # in Python's unbuffered mode (many CI images set it), its job paused while the report goes to a pipe
    command = [sys.executable, "-m", "codspeed_client.cli", "status", "--format", "json", "--benchmarks"]
    command += ["--project", project, "--run-id", run_id, "--commit", "a" * 40]
    shown = subprocess.Popen(
        command, env={**env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out = os.read(shown.stdout.fileno(), 65536)  # its report begun: the rest waits on the full pipe
    for _ in range(3):
        time.sleep(0.2)
        shown.send_signal(signal.SIGSTOP)
        shown.send_signal(signal.SIGCONT)
        out += os.read(shown.stdout.fileno(), 65536)
    out, err = out + shown.stdout.read(), shown.stderr.read()
    assert shown.wait(timeout=120) == 0, err
    assert sorted(b["name"] for b in json.loads(out)["benchmarks"]) == sorted(names)
