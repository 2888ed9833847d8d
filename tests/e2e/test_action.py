"""action.yml, run as GitHub's runner runs a composite action (``tests.github_actions.Runner``):
once with this machine's externally managed system Python (as ubuntu-latest's), once with a
bare venv's (as actions/setup-python's), against the local stack."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codspeed_local.profiles import make_profile_folder
from tests.conftest import TOKEN
from tests.factories import git_commit
from tests.github_actions import ACTION, ROOT, Runner

SYSTEM_PYTHON = Path("/usr/bin/python3")


def _bare_venv(tmp: Path) -> Path:
    venv = tmp / "setup-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin"


PYTHONS = {"system python (externally managed)": lambda tmp: SYSTEM_PYTHON.parent, "bare venv": _bare_venv}


@pytest.mark.parametrize("which", list(PYTHONS))
@pytest.mark.slow
def test_the_action_installs_the_client_alone_and_pushes_closes_and_waits(stack, project, run_id, tmp_path, which):
    if which.startswith("system") and not (
        SYSTEM_PYTHON.exists() and list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED"))
    ):
        pytest.skip("no externally managed system Python on this machine")
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": project,
        "GITHUB_RUN_ID": run_id,
        "GITHUB_SHA": "a" * 40,
        "GITHUB_REF": "refs/heads/feature",
        "GITHUB_JOB": "bench",
        "GITHUB_ACTION_PATH": str(ROOT),
    }
    job = Runner(tmp_path, PYTHONS[which](tmp_path), env)
    make_profile_folder(job.workspace / "bench" / "profiles", 4242, ["t::action"])
    before = sorted(p.relative_to(job.workspace) for p in job.workspace.rglob("*"))
    common = {"api-url": stack.api_url, "token": TOKEN}

    code, _, err = job.use({**common, "command": "open", "shards": "3", "skip": "3"})
    assert code == 0 and f"run {run_id} ({project}): open: opened: 3 shards expected, 1 skipped" in job.last_out, err
    code, outputs, err = job.use({**common, "shard": "1/3", "profile-folder": "profiles", "working-directory": "bench"})
    assert code == 0, err
    assert outputs["run-id"] == run_id
    venv = job.temp / "codspeed-client-venv"
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys, requests, urllib3, idna, certifi, "
            "codspeed_client, codspeed_rules; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'boto3', 'pydantic', 'aws_lambda_powertools', 'isal', 'codspeed_aggregator'}))",
        ],
        capture_output=True,
        text=True,
    )
    assert installed.stdout.strip() == "[]", installed.stderr  # requests complete, and nothing of the aggregator

    assert job.use({**common, "command": "close", "skip": "2"})[0] == 0
    code, outputs, err = job.use({**common, "command": "status", "timeout": "60"})
    assert code == 0, err
    assert outputs["state"] == "forwarded" and outputs["upstream-run-id"]
    report = Path(outputs["report-path"])
    verdict, _, first = report.read_text().splitlines()[:3]
    assert report.parent.parent == job.temp and "forwarded, 1/3 shards in" in first
    assert verdict == "**No change past 5%**"  # the reviewer's question first (2 and 3 skipped on purpose)
    assert "Skipped shards: 2, 3" in job.summary.read_text()
    # the log says the report in plain words, the summary in Markdown: no escapes (tests/test\_x.py\:\:…) in the log
    assert "forwarded, 1/3 shards in" in job.last_out and "**" not in job.last_out and "\\" not in job.last_out
    assert (
        sorted(p.relative_to(job.workspace) for p in job.workspace.rglob("*")) == before
    )  # nothing written into the checkout

    code, _, err = job.use({**common, "command": "open", "run-id": f"{run_id}-jobs", "jobs": "bench=2\n\nmemory\n"})
    assert code == 0 and job.last_out.strip() == (
        f"run {run_id}-jobs ({project}): open: opened: 2 shards in job bench; 1 shard in job memory expected"
    ), job.last_out + err


def test_an_unreachable_aggregator_is_a_warning_for_push_unless_fail_on_error(tmp_path):
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.preinstall()
    make_profile_folder(job.workspace / "profiles", 7, ["t::x"])
    inputs = {"api-url": "http://127.0.0.1:9", "token": "t", "shard": "1/1", "profile-folder": "profiles"}
    job.env["CODSPEED_RETRIES"] = "1"
    code, _, err = job.use(inputs)
    assert code == 0
    code, _, err = job.use({**inputs, "fail-on-error": "true"})
    assert code == 6 and "cannot reach the aggregator" in err
    code, _, err = job.use({**inputs, "shard": "3/2"})  # bad input always fails
    assert code == 2 and "--shard 3/2" in err


def test_a_status_error_is_said_once_in_the_log(tmp_path):
    """The JSON step and the Markdown step each said the same error: twice in the log, before."""
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.preinstall()
    job.env["CODSPEED_RETRIES"] = "1"
    code, _, err = job.use({"command": "status", "api-url": "http://127.0.0.1:9", "token": "t"})
    assert code == 6 and err.count("codspeed-client: error: cannot reach the aggregator") == 1, err
    assert not job.summary.exists() or not job.summary.read_text()


@pytest.mark.parametrize(
    "name, value, takes",
    [
        ("command", "deploy", "a command is plan, open, push, close or status"),
        ("wait", "yes", "a boolean input is true or false (True, TRUE, False, FALSE)"),  # the gate never passes early
        ("executor", "cachegrind", "valgrind, walltime or memory (empty: told by the profile folder)"),
        ("timeout", "5m", "a number of seconds, such as 300"),
        ("timeout", "", "a number of seconds, such as 300"),
        ("fail-on-regression", "five", "a percentage (5 or 5%), report (the stack's threshold), or empty"),
        ("fail-on-regression", "5 %", "a percentage (5 or 5%), report (the stack's threshold), or empty"),
        # push ignored it without a word
        ("skip", "2", "only open and close take skip (the shards a run leaves out, carried from the base branch)"),
    ],
)
def test_an_input_no_step_could_use_is_exit_2_naming_it_before_anything_runs(tmp_path, name, value, takes):
    """GitHub hands every input as a string: a number or a choice that is not one was passed on (a
    command, before) or failed later in a flag's words; each is refused first, naming the input."""
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.preinstall()
    make_profile_folder(job.workspace / "profiles", 7, ["t::x"])
    job.env["CODSPEED_RETRIES"] = "1"
    code, outputs, err = job.use(
        {"api-url": "http://127.0.0.1:9", "token": "t", "shard": "1/1", "profile-folder": "profiles", name: value}
    )
    assert (code, err) == (2, f"codspeed-client: error: input {name} is '{value}': {takes}\n")
    assert job.last_out == "" and not any(outputs.values())  # nothing ran: no push was tried


@pytest.mark.parametrize(
    "name, value",
    [
        ("executor", "walltime"),
        ("timeout", "0"),
        ("fail-on-regression", "2.5%"),
        ("fail-on-regression", "report"),
        ("fail-on-regression", ""),
    ],
)
@pytest.mark.slow
def test_each_input_value_the_action_documents_is_taken(tmp_path, name, value):
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.preinstall()
    job.env["CODSPEED_RETRIES"] = "1"
    code, _, err = job.use({"command": "status", "api-url": "http://127.0.0.1:9", "token": "t", name: value})
    assert code == 6 and "cannot reach the aggregator" in err, err  # past the checks, to the aggregator


def test_the_docs_workflows_use_only_inputs_the_action_has():
    readme = "".join(page.read_text() for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
    blocks = re.findall(
        r"uses: acme/codspeed-shard-aggregator@main\n(?: +id: .*\n)? +with:\n((?: {10}[\w-]+:.*\n)+)", readme
    )
    assert blocks
    for block in blocks:
        for name in re.findall(r"^\s+([\w-]+):", block, re.M):
            assert name in ACTION["inputs"], name
    assert json.loads(json.dumps(ACTION["outputs"]))  # outputs are declared


@pytest.mark.slow
def test_the_actions_gate_fails_the_step_on_a_regression_and_still_writes_its_outputs(stack, project, tmp_path):
    import requests

    from tests.factories import bundle, put, upload_request

    def push(run: str, index: int, cost: int, **meta) -> None:
        names = [f"tests/test_gate{index}.py::test_{j}" for j in range(2)]
        data = bundle(200 + index, names, costs={name: cost for name in names})
        answer = requests.post(
            f"{stack.api_url}/v1/uploads",
            headers={"Authorization": TOKEN},
            timeout=30,
            json=upload_request(project, run, str(index), data, total=2, **meta),
        )
        assert answer.status_code == 201, answer.text
        put(answer.json(), data)

    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_REPOSITORY": project,
            "GITHUB_SHA": "c" * 40,
            "GITHUB_REF": "refs/pull/3/merge",
        },
    )
    job.preinstall()
    common = {"api-url": stack.api_url, "token": TOKEN, "command": "status", "timeout": "60"}
    for index in (1, 2):  # the baseline, forwarded on main
        push("main-gate", index, 1000)
    assert job.use({**common, "run-id": "main-gate", "fail-on-regression": "5"})[0] == 0  # main against itself
    pull = {"ref": "refs/pull/3/merge", "base_ref": "main", "commit": "c" * 40}
    push("pr-gate", 1, 1300, **pull)  # 30% slower
    push("pr-gate", 2, 1030, **pull)  # 3%: under 5%
    code, outputs, err = job.use({**common, "run-id": "pr-gate", "fail-on-regression": "5"})
    assert code == 13, err
    assert "2 benchmarks regressed past 5% against the baseline: worst tests/test_gate1.py::test_0 +30.0%" in err
    assert outputs["state"] == "forwarded" and Path(outputs["report-path"]).is_file()
    assert job.use({**common, "run-id": "pr-gate", "fail-on-regression": "40"})[0] == 0
    assert job.use({**common, "run-id": "pr-gate"})[0] == 0  # no gate asked: the step passes


@pytest.mark.slow
def test_a_forks_pull_request_runs_plan_push_and_status_green_with_one_warning_each_and_no_traceback(
    stack, project, tmp_path
):
    """A fork's jobs get no secrets, and this project takes no request without one (it is not in
    TokenlessProjects): each step says so once and the job stays green. The push and status steps printed
    Python tracebacks (the
    output helper read a warning as JSON), the status step wrote a raw ::warning into the step
    summary, and plan wrote no outputs (it stopped first), so the matrix ran no benchmark."""
    repo = tmp_path / "workspace"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / ".codspeed").mkdir()
    (repo / ".codspeed" / "shards.toml").write_text('[shards.a]\npaths = ["a/**"]\n[shards.b]\npaths = ["b/**"]\n')
    (repo / "b").mkdir()
    (repo / "b" / "y.rs").write_text("b\n")
    subprocess.run([*git, "add", "."], check=True)
    base = git_commit(repo, "the config")
    (repo / "a").mkdir()
    (repo / "a" / "x.rs").write_text("changed\n")
    subprocess.run([*git, "add", "."], check=True)
    head = git_commit(repo, "the fork's change")
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": 12,
                    "head": {"sha": head, "repo": {"full_name": "someone/x"}},
                    "base": {"sha": base, "repo": {"full_name": project}},
                }
            }
        )
    )
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": project,
        "GITHUB_RUN_ID": "7300000001",
        "GITHUB_SHA": "e" * 40,
        "GITHUB_REF": "refs/pull/12/merge",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_JOB": "bench",
        "GITHUB_ACTION_PATH": str(ROOT),
    }
    job = Runner(tmp_path, Path(sys.executable).parent, env)
    job.preinstall()
    make_profile_folder(job.workspace / "profiles", 4242, ["t::fork"])
    common = {"api-url": stack.api_url, "token": ""}  # ${{ secrets.CODSPEED_AGGREGATOR_TOKEN }} on a fork

    for inputs in ({"command": "plan"}, {"shard": "1/2", "profile-folder": "profiles"}, {"command": "status"}):
        code, outputs, err = job.use({**common, **inputs})
        said = job.last_out + err
        assert code == 0 and "Traceback" not in said, said
        assert said.count("::warning title=codspeed-client") == 1 and "comes from a fork" in said
        assert f"TokenlessProjects parameter, and {project} is not one of them" in said  # the aggregator's own word
        if inputs.get("command") == "plan":  # its outputs written: the matrix runs the fork's benchmarks
            written = dict(line.split("=", 1) for line in (job.temp / "output-1").read_text().splitlines())
            assert (written["shards"], written["skip"]) == ("a", "b")
    assert not job.summary.exists() or "::" not in job.summary.read_text()
    assert (outputs["state"], outputs["upstream-run-id"]) == ("", "")


@pytest.mark.parametrize("given, read", [("True", True), ("TRUE", True), ("yes", None), ("1", None), ("False", False)])
def test_a_boolean_input_is_read_as_githubs_own_actions_read_it(tmp_path, given, read):
    """``fail-on-error: yes`` was ignored (only the exact string "true" counted), so a push to an
    aggregator that is down exited 0; GitHub's getBooleanInput takes true/True/TRUE and
    false/False/FALSE and refuses anything else."""
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.preinstall()
    make_profile_folder(job.workspace / "profiles", 7, ["t::x"])
    job.env["CODSPEED_RETRIES"] = "1"
    code, _, err = job.use(
        {
            "api-url": "http://127.0.0.1:9",
            "token": "t",
            "shard": "1/1",
            "profile-folder": "profiles",
            "fail-on-error": given,
        }
    )
    if read is None:
        assert code == 2 and f"input fail-on-error is '{given}': a boolean input is true or false" in err, err
    else:
        assert code == (6 if read else 0), err  # the aggregator is down: a failure when asked for, else a warning


def test_a_runner_whose_python3_is_too_old_is_told_which_python_the_client_needs(tmp_path):
    """pip's "requires a different Python: 3.9.18 not in '>=3.10'" failed the push job with exit 1, before
    fail-on-error was read."""
    old = tmp_path / "old-python"
    old.mkdir()
    (old / "python3").write_text("#!/bin/bash\necho 3.9\nexit 1\n")  # Ubuntu 20.04's python3, as the check sees it
    (old / "python3").chmod(0o755)
    job = Runner(
        tmp_path,
        Path(sys.executable).parent,
        {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/widgets", "GITHUB_RUN_ID": "1", "GITHUB_SHA": "a" * 40},
    )
    job.env["PATH"] = f"{old}:{job.env['PATH']}"
    said = (
        "codspeed-client needs Python 3.10 or newer, and this runner's python3 is 3.9: add actions/setup-python "
        "(python-version: '3.12') before this step"
    )
    inputs = {"api-url": "http://127.0.0.1:9", "token": "t", "shard": "1/1", "profile-folder": "profiles"}
    code, _, err = job.use(inputs)
    assert code == 0 and f"::warning title=CodSpeed shard not pushed::{said}" in job.last_out + err
    code, _, err = job.use({**inputs, "fail-on-error": "true"})
    assert (code, err.strip()) == (3, f"::error title=codspeed-client::{said}")
    code, _, err = job.use({**inputs, "command": "status"})  # the gate fails: it cannot say what it gates
    assert code == 3 and said in err
