"""The docs' hand-run example (docs/local.md), run verbatim in a shell (with the ``.venv`` it names being the
environment these tests run in), in a fresh folder inside a git repository."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_docs_hand_run_example_runs_verbatim(tmp_path):
    page = (ROOT / "docs" / "local.md").read_text()
    block = re.search(r"<!-- docs-check: hand-run -->\n```sh\n(.*?)```", page, re.S)[1]
    work = tmp_path / "repo"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CODSPEED_"))
    }
    for command in (
        ["git", "init", "-q"],
        ["git", "-c", "user.email=a@b.c", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "first"],
    ):
        subprocess.run(command, cwd=work, check=True, env=env)
    script = "set -e\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + block  # a failing line leaves no aggregator up
    done = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pushed shard 1 of 2 of run 1 (acme/widgets)" in done.stdout
    assert "run 1 of acme/widgets: open, 1/2 shards in" in done.stdout
    assert "POST /v1/uploads 201" in done.stdout  # the local aggregator's one line per request
    assert "Traceback" not in done.stderr and "UserWarning" not in done.stderr
