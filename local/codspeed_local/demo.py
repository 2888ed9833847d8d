"""A three-shard run through the local stack with the real client, pids colliding on purpose."""

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from .profiles import make_profile_folder
from .stack import LocalStack

PROJECT, SHARDS = "acme/widgets", 3


def _client(stack: LocalStack, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CODSPEED_AGGREGATOR_URL=stack.api_url, CODSPEED_AGGREGATOR_TOKEN=stack.token)
    return subprocess.run([sys.executable, "-m", "codspeed_client.cli", *args], env=env, capture_output=True, text=True)


def run_demo(out=print) -> int:
    run_id = f"demo-{int(time.time())}"
    common = ["--project", PROJECT, "--run-id", run_id, "--commit", "c0ffee" * 6 + "c0ff"]
    with tempfile.TemporaryDirectory(prefix="codspeed-demo-") as work, LocalStack() as stack:
        out(f"local stack up: API {stack.api_url}, stand-in upstream keeping uploads in {stack.upstream_dir}")
        folders = [
            make_profile_folder(
                Path(work) / f"shard-{i}", 4242, [f"tests/test_part{i}.py::test_bench_{j}" for j in range(4)]
            )
            for i in range(1, SHARDS + 1)
        ]
        out(f"{SHARDS} profile folders, every one holding 4242.out (the pids collide)")
        shown = -1
        for index, folder in enumerate(folders, start=1):
            pushed = _client(stack, "push", "--shard", f"{index}/{SHARDS}", "--profile-folder", str(folder), *common)
            out(pushed.stdout.strip() or pushed.stderr.strip())
            if pushed.returncode:
                return pushed.returncode
            shown = _show_progress(stack, common, shown, out, until_version_above=shown)
        waited = _client(stack, "status", "--wait", "--timeout", "60", "--interval", "0.5", *common)
        out(waited.stdout.strip())
        uploads = stack.upstream.uploads()
        out(f"\nuploads received by the upstream: {len(uploads)}")
        for upload in uploads:
            with tarfile.open(upload / "archive.tar.gz") as tar:
                names = [m.name for m in tar.getmembers() if m.name.endswith(".out")]
            metadata = json.loads((upload / "metadata.json").read_text())
            out(f"upload in {upload}: {', '.join(names)}; profileMd5 {metadata['profileMd5']}")
        return waited.returncode


def _show_progress(stack, common, shown, out, until_version_above, timeout=15.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = _client(stack, "status", "--format", "json", *common)
        if status.returncode == 0:
            report = json.loads(status.stdout)
            if report["version"] > until_version_above and report["arrived"] > 0:
                expected = report["expected"]
                if not report["partial"]:
                    partial = "final"
                elif expected is not None and report["arrived"] >= expected:
                    partial = "all in: the run ends now"  # the report is partial until then, not the shards
                else:
                    partial = "partial: more shards to come"
                out(
                    f"  report v{report['version']}: {report['state']}, {report['arrived']}/{expected} shards in "
                    f"({partial})"
                )
                out(f"  run page: {report['page_url']}")
                return report["version"]
        time.sleep(0.2)
    return shown
