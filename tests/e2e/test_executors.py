"""End to end: one suite profiled by two executors (pytest-codspeed's simulation and walltime
modes, real recorded folders), each pushed as ``--shard 1/3 … 3/3`` into one run by the real
client. A shard is its name and its executor: six shards, forwarded so that the upstream's
combined view (the last upload of each runPartId) holds every benchmark of each executor once,
merged or, in parts mode, sent shard by shard."""

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import requests

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from tests.conftest import PARTS_PROJECT, TOKEN
from tests.factories import wait_for
from tests.runner import recorded, recorded_walltime

COMMIT = "0c1d2e3f4a5b69788796a5b4c3d2e1f0a9b8c7d6"
ENDED = ("forwarded", "forward_failed", "closed_empty")


def _folders(tmp_path: Path) -> dict[tuple[str, int], Path]:
    """Shards 1-3 of each executor: the recorded valgrind shards as they are, and the recorded
    walltime folder cut in three (pytest-split would give each job one benchmark of the three)."""
    folders = {}
    for shard in (1, 2, 3):
        folder = tmp_path / f"valgrind-{shard}"
        with tarfile.open(fileobj=io.BytesIO(recorded(shard))) as tar:
            tar.extractall(folder, filter="data")
        folders["valgrind", shard] = folder
    with tarfile.open(fileobj=io.BytesIO(recorded_walltime())) as tar:
        whole = {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    [results] = [name for name in whole if name.startswith("results/") and name.endswith(".json")]
    measured = json.loads(whole[results])
    for shard, benchmark in enumerate(measured["benchmarks"], start=1):
        folder = tmp_path / f"walltime-{shard}"
        for name, data in whole.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(
                json.dumps({**measured, "benchmarks": [benchmark]}).encode() if name == results else data
            )
        folders["walltime", shard] = folder
    return folders


def _push(stack, project: str, run_id: str, shard: int, folder: Path) -> subprocess.Popen:
    env = {"PATH": "/usr/bin:/bin", "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": stack.token}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "codspeed_client.cli",
            "push",
            "--shard",
            f"{shard}/3",
            "--profile-folder",
            str(folder),
            "--project",
            project,
            "--run-id",
            run_id,
            "--commit",
            COMMIT,
            "--json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pushed(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out)


def _report(stack, project: str, run_id: str) -> dict:
    return requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10
    ).json()


def _final(stack, project: str, run_id: str) -> dict:
    return wait_for(lambda: (r := _report(stack, project, run_id)).get("state") in ENDED and r, timeout=90)


def _held(stack, project: str, run_id: str) -> dict[str, set[str]]:
    """What CodSpeed would hold of the run: each runPartId's last upload, by executor, benchmarks
    counted once per part they stand in."""
    [parts] = [p for (owner, run), p in stack.upstream.combined(project).items() if run == run_id]
    held: dict[str, list[str]] = {}
    for upload in parts.values():
        executor = json.loads((upload / "metadata.json").read_text())["runner"]["executor"]
        held.setdefault(executor, []).extend(benchmarks_in(archive_of(upload)))
    assert not stack.upstream.benchmarks_twice(project)
    return held


def _benchmarks(held: dict) -> dict[str, list[str]]:
    return {executor: sorted(name.rsplit("::", 1)[-1] for name in names) for executor, names in held.items()}


@pytest.mark.slow
def test_two_executors_pushed_at_once_under_one_name_are_six_shards_and_each_benchmark_reaches_the_upstream_once(
    stack, project, run_id, tmp_path
):
    folders = _folders(tmp_path)
    pushes = [
        _push(stack, project, run_id, shard, folder)
        for (_, shard), folder in sorted(folders.items(), key=lambda f: f[0][1])
    ]
    answers = [_pushed(p) for p in pushes]
    assert {a["run_id"] for a in answers} == {run_id}

    final = _final(stack, project, run_id)
    assert final["state"] == "forwarded" and final["arrived"] == 6
    shards = {s["name"]: (s["executor"], s.get("display")) for s in final["shards"]}
    assert shards == {
        "1": ("valgrind", None),
        "2": ("valgrind", None),
        "3": ("valgrind", None),
        "1~walltime": ("walltime", "1 (walltime)"),
        "2~walltime": ("walltime", "2 (walltime)"),
        "3~walltime": ("walltime", "3 (walltime)"),
    }
    three = ["test_fib_10", "test_sorted", "test_sum"]
    assert _benchmarks(_held(stack, project, run_id)) == {"valgrind": three, "walltime": three}
    part_ids = sorted(
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in stack.upstream.uploads(run_id)
    )
    assert part_ids == ['codspeed-shard-aggregator-{"aggregated-pushed-part":1,"executor":"valgrind"}'] + [
        f'codspeed-shard-aggregator-{{"aggregated-shard":"{i}","executor":"walltime"}}' for i in (1, 2, 3)
    ]


@pytest.mark.slow
def test_a_second_executor_pushed_after_the_first_was_forwarded_is_one_next_attempt_that_sends_only_its_shards(
    stack, project, run_id, tmp_path
):
    folders = _folders(tmp_path)
    for shard in (1, 2, 3):
        _pushed(_push(stack, project, run_id, shard, folders["valgrind", shard]))
    assert _final(stack, project, run_id)["arrived"] == 3
    for shard in (1, 2, 3):  # in sequence: the first opens attempt 2, the others join it
        assert _pushed(_push(stack, project, run_id, shard, folders["walltime", shard]))["run_id"] == f"{run_id}~2"

    final = _final(stack, project, f"{run_id}~2")
    assert final["state"] == "forwarded" and final["arrived"] == 6 and final["attempt"] == 2
    assert _report(stack, project, f"{run_id}~3").get("state") is None  # no third attempt was opened
    three = ["test_fib_10", "test_sorted", "test_sum"]
    assert _benchmarks(_held(stack, project, run_id)) == {"valgrind": three, "walltime": three}
    assert len(stack.upstream.uploads(run_id)) == 4  # the valgrind part once, then each walltime shard once


@pytest.mark.slow
def test_in_parts_mode_each_executors_shard_goes_as_its_own_part_and_never_replaces_the_others(stack, run_id, tmp_path):
    folders = _folders(tmp_path)
    for (_, shard), folder in sorted(folders.items(), key=lambda f: (f[0][1], f[0][0])):  # both shard 1s first
        _pushed(_push(stack, PARTS_PROJECT, run_id, shard, folder))
    final = _final(stack, PARTS_PROJECT, run_id)
    assert final["state"] == "forwarded" and final["arrived"] == 6
    assert {s["name"]: s["state"] for s in final["shards"]} == dict.fromkeys(
        ["1", "2", "3", "1~walltime", "2~walltime", "3~walltime"], "arrived"
    )
    three = ["test_fib_10", "test_sorted", "test_sum"]
    assert _benchmarks(_held(stack, PARTS_PROJECT, run_id)) == {"valgrind": three, "walltime": three}
    part_ids = [
        json.loads((u / "metadata.json").read_text())["runPart"]["runPartId"] for u in stack.upstream.uploads(run_id)
    ]
    # one upload each, under the shard's name and its executor: the two shard 1s are two parts
    assert sorted(part_ids) == sorted(
        [f'codspeed-shard-aggregator-{{"aggregated-shard":"{i}","executor":"valgrind"}}' for i in (1, 2, 3)]
        + [f'codspeed-shard-aggregator-{{"aggregated-shard":"{i}","executor":"walltime"}}' for i in (1, 2, 3)]
    )
