"""End to end: what each benchmark cost on main, recorded at arrival, exported for pytest-split
(``codspeed-client durations``) and balanced into shards (``split``), with the real client."""

import json
import os
from pathlib import Path

import pytest
import requests

from codspeed_local.profiles import make_profile_folder
from tests.conftest import TOKEN
from tests.e2e.test_sharded_run import _final, _run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pytest_codspeed"
MAIN = ["--commit", "1" * 40, "--ref", "refs/heads/main"]
COSTS = {
    "tests/test_a.py::heavy": 160_000_000,
    "tests/test_a.py::light": 40_000_000,
    "tests/test_b.py::mid": 80_000_000,
}


@pytest.mark.slow
def test_costs_recorded_on_main_are_exported_for_pytest_split_and_balance_a_split(
    stack, project, tmp_path, monkeypatch
):
    run_id = f"costs-main-{os.getpid()}"
    folder = make_profile_folder(tmp_path / "valgrind", 4242, list(COSTS), costs=COSTS)
    common = ["--project", project, "--run-id", run_id, *MAIN]
    assert _run(stack, "push", "--shard", "1/1", "--profile-folder", str(folder), *common).returncode == 0
    assert _final(stack, project, run_id)["state"] == "forwarded"  # complete with valgrind's shard
    # the same shard profiled by another executor: pytest-codspeed's own walltime results, as a real run wrote them
    walltime = _run(
        stack,
        "push",
        "--shard",
        "1/1",
        "--archive",
        str(FIXTURES / "walltime-shard-1.tar"),
        "--executor",
        "walltime",
        *common,
    )
    assert walltime.returncode == 0, walltime.stderr  # the run was complete with valgrind's: its next attempt
    assert _final(stack, project, f"{run_id}~2")["state"] == "forwarded"

    written = tmp_path / ".test_durations"
    exported = _run(stack, "durations", "--project", project, "-o", str(written))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip().endswith(f"costs of run {run_id}~2 on main written to {written}")
    durations = json.loads(written.read_text())
    assert {n: durations[n] for n in COSTS} == {
        "tests/test_a.py::heavy": 4.0,
        "tests/test_a.py::light": 1.0,
        "tests/test_b.py::mid": 2.0,
    }  # instructions at 40 M a second
    timed = sorted(s for n, s in durations.items() if n not in COSTS)
    assert [round(s, 4) for s in timed] == [3.9709, 3.9773, 4.0001]  # pytest-codspeed's warm-up (1 s) and rounds (3 s)

    names = tmp_path / "names.txt"
    names.write_text("\n".join([*COSTS, "tests/test_c.py::new"]) + "\n")  # never run: the median cost, 3.974 s
    split = _run(stack, "split", "--shards", "2", "--names", str(names), "--project", project, "--json")
    assert split.returncode == 0, split.stderr
    assert {k: (round(v["seconds"], 3), v["benchmarks"]) for k, v in json.loads(split.stdout).items()} == {
        "1": (5.0, ["tests/test_a.py::heavy", "tests/test_a.py::light"]),
        "2": (5.974, ["tests/test_c.py::new", "tests/test_b.py::mid"]),
    }
    too_many = _run(stack, "split", "--shards", "5", "--names", str(names), "--project", project, "--json")
    assert too_many.returncode == 2 and too_many.stdout.strip() == json.dumps(
        {
            "error": "--shards 5 for 4 benchmarks: 1 shard would be empty, "
            "and pytest fails a job that collects no test; "
            "split into 4 or fewer",
            "exit_code": 2,
        }
    ), too_many.stdout + too_many.stderr

    from dataclasses import replace

    from codspeed_aggregator import wiring

    api = wiring.for_api()
    monkeypatch.setattr(api, "settings", replace(api.settings, report_inline_bytes=200))  # Lambda's 6 MB, made small
    answer = requests.get(
        f"{stack.api_url}/v1/costs",
        params={"project": project},
        headers={"Authorization": TOKEN},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 303 and "X-Amz-Signature=" in answer.headers["Location"], answer.text
    assert not answer.headers["Location"].startswith(stack.api_url)  # the bucket, not Lambda, sends the bytes
    written.unlink()
    followed = _run(stack, "durations", "--project", project, "-o", str(written))  # the client follows the link
    assert followed.returncode == 0 and json.loads(written.read_text()) == durations, followed.stderr


def test_costs_of_a_branch_with_no_forwarded_run_are_refused_in_one_sentence(stack, project):
    refused = _run(stack, "durations", "--project", project, "--branch", "nowhere")
    assert refused.returncode == 5 and f"no run of {project} was forwarded on nowhere yet" in refused.stderr, (
        refused.stderr
    )
    assert _run(stack, "split", "--shards", "0", "--project", project).returncode == 2


@pytest.mark.slow
def test_every_split_of_a_run_and_of_its_re_runs_uses_the_costs_its_first_split_used(stack, project, tmp_path):
    """split read the branch's latest costs: once main forwarded another run between a run's first
    attempt and its re-run, a re-run shard got other benchmarks (1 then 3), and some ran in two
    shards or none. --run-id was accepted and ignored."""

    def main_run(name: str, costs: dict) -> None:
        folder = make_profile_folder(tmp_path / name, 4242, list(costs), costs=costs)
        assert (
            _run(
                stack,
                "push",
                "--shard",
                "1/1",
                "--profile-folder",
                str(folder),
                "--project",
                project,
                "--run-id",
                name,
                *MAIN,
            ).returncode
            == 0
        )
        assert _final(stack, project, name)["state"] == "forwarded"

    def split(*run) -> dict:
        done = _run(stack, "split", "--shards", "2", "--project", project, "--json", *run)
        assert done.returncode == 0, done.stderr
        return {shard: group["benchmarks"] for shard, group in json.loads(done.stdout).items()}

    main_run(f"costs-a-{os.getpid()}", COSTS)
    pr = ["--run-id", f"pr-{os.getpid()}"]
    first = split(*pr)
    assert first == {"1": ["tests/test_a.py::heavy"], "2": ["tests/test_b.py::mid", "tests/test_a.py::light"]}
    main_run(f"costs-b-{os.getpid()}", {**COSTS, "tests/test_a.py::heavy": 10_000_000})  # main moves on
    assert split(*pr) == first  # the re-run's split: the same shards
    assert split(*pr[:1], f"{pr[1]}~2") == first  # its next attempt's too
    assert split() != first  # without a run: the branch's latest
    durations = _run(stack, "durations", "--project", project, "--format", "json", *pr)
    assert json.loads(durations.stdout)["run_id"] == f"costs-a-{os.getpid()}", durations.stderr


@pytest.mark.slow
def test_durations_take_each_benchmarks_latest_recorded_cost_from_runs_forwarded_with_shards_missing(
    stack, project, tmp_path
):
    """durations read only a run that is a baseline (forwarded whole): after main runs each with a
    shard missing, it answered 404 "no run was forwarded on main yet", though two were."""
    costs = {
        "1": {"tests/test_1.py::a": 40_000_000},
        "2": {"tests/test_2.py::b": 80_000_000},
        "3": {"tests/test_3.py::c": 120_000_000},
    }
    runs = [f"gaps-{i}-{os.getpid()}" for i in (1, 2)]
    for run, shards in zip(runs, (("1", "2"), ("3",)), strict=False):  # each run forwarded with the others missing
        for shard in shards:
            folder = make_profile_folder(tmp_path / run / shard, 4242, list(costs[shard]), costs=costs[shard])
            assert (
                _run(
                    stack,
                    "push",
                    "--shard",
                    shard,
                    "--expect",
                    "1,2,3",
                    "--profile-folder",
                    str(folder),
                    "--project",
                    project,
                    "--run-id",
                    run,
                    *MAIN,
                ).returncode
                == 0
            )
        _wait_arrived(stack, project, run, len(shards))
        assert _run(stack, "close", "--project", project, "--run-id", run).returncode == 0
        assert _final(stack, project, run)["state"] == "forwarded"
    written = tmp_path / ".test_durations"
    exported = _run(stack, "durations", "--project", project, "-o", str(written))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip().endswith(f"costs of runs {runs[1]}, {runs[0]} on main written to {written}")
    assert json.loads(written.read_text()) == {
        "tests/test_1.py::a": 1.0,
        "tests/test_2.py::b": 2.0,
        "tests/test_3.py::c": 3.0,
    }


def _wait_arrived(stack, project, run_id, count):
    from tests.factories import wait_for

    wait_for(
        lambda: (
            requests.get(f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10)
            .json()
            .get("arrived")
            == count
        ),
        timeout=60,
    )
