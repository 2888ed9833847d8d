"""action.yml's script, run by bash as GitHub would run it (inputs substituted), against the local stack."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from codspeed_aggregator.local.profiles import make_profile_folder

ACTION = yaml.safe_load((Path(__file__).resolve().parents[2] / "action.yml").read_text())


def _run_step(inputs: dict, workdir: Path, env: dict) -> subprocess.CompletedProcess:
    step = ACTION["runs"]["steps"][1]
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()} | inputs
    step_env = {k: re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: values[m[1]], v) for k, v in step["env"].items()}
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # codspeed-client as pip installs it
    return subprocess.run(["bash", "-c", step["run"]], cwd=workdir, capture_output=True, text=True,
                          env={**env, **step_env, "PATH": path}, timeout=120)


def test_the_action_pushes_closes_and_waits(stack, project, run_id, tmp_path):
    env = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": project, "GITHUB_RUN_ID": run_id, "GITHUB_SHA": "a" * 40,
           "GITHUB_REF": "refs/heads/feature", "GITHUB_JOB": "bench", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    common = {"api-url": stack.api_url, "token": stack.token}
    folder = make_profile_folder(tmp_path / "profiles", 4242, ["t::action"])
    pushed = _run_step({**common, "shard": "1/2", "profile-folder": str(folder)}, tmp_path, env)
    assert pushed.returncode == 0, pushed.stderr
    assert _run_step({**common, "command": "close", "skip": "2"}, tmp_path, env).returncode == 0
    waited = _run_step({**common, "command": "status", "timeout": "60"}, tmp_path, env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "forwarded, 1/2 shards in" in summary.splitlines()[0] and "Skipped: 2" in summary


def test_the_action_refuses_an_unknown_command(tmp_path):
    result = _run_step({"command": "deploy", "api-url": "http://127.0.0.1:9", "token": "t"}, tmp_path, {})
    assert result.returncode == 2 and "command must be push, close or status, not 'deploy'" in result.stderr
