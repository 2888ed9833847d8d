"""`codspeed-aggregator local` in a process of its own: a run past its deadline is closed by the
sweeper, in either forward mode (parts, the default: its one shard was upstream already, and is not sent again);
Ctrl-C stops it, however it was started."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from codspeed_local.profiles import make_profile_folder
from tests.factories import wait_for
from tests.local_process import local_aggregator

pytestmark = pytest.mark.slow  # over 3 s each on a 2-core machine: left out of the quick loop (-m "not slow")


@pytest.mark.parametrize("mode, deadline", [("one-upload", 4), (None, 20)])  # parts, the default: upstream well before
def test_a_run_past_its_deadline_is_closed_and_its_absent_shard_is_missing(tmp_path, mode, deadline):
    with local_aggregator(
        "--token",
        "deadline-token",
        "--deadline",
        str(deadline),
        "--upstream-dir",
        str(tmp_path / "upstream"),
        *(("--forward-mode", mode) if mode else ()),
    ) as stack:
        env = {**os.environ, "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": "deadline-token"}
        common = ["--project", "acme/deadline", "--run-id", "d1", "--commit", "d" * 40]
        folder = make_profile_folder(tmp_path / "shard", 99, ["t::deadline"])
        client = [sys.executable, "-m", "codspeed_client.cli"]
        pushed = subprocess.run(
            [*client, "push", "--shard", "1/2", "--profile-folder", str(folder), *common],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert pushed.returncode == 0, pushed.stderr
        if mode is None:  # the parts mode: upstream while the run is still open
            wait_for(lambda: list((tmp_path / "upstream").glob("*/archive.tar.gz")), timeout=deadline / 2)
            state = requests.get(
                f"{stack.api_url}/v1/runs/acme/deadline/d1", headers={"Authorization": "deadline-token"}, timeout=10
            ).json()["state"]
            assert state == "open"
        waited = subprocess.run(
            [*client, "status", "--wait", "--timeout", "60", "--interval", "0.5", *common],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert waited.returncode == 11, waited.stdout + waited.stderr
        assert "forwarded, 1/2 shards in" in waited.stdout and "2: missing" in waited.stdout
        assert len(list((tmp_path / "upstream").glob("*/archive.tar.gz"))) == 1
    assert stack.process.returncode == 0 and "stopped" in stack.output


def test_ctrl_c_stops_it_even_started_in_the_background_of_a_script():
    """A shell script's ``cmd &`` starts it with SIGINT ignored, where Python sets no handler of
    its own: Ctrl-C (or the SIGINT a test sends) stops it all the same, and at once."""
    process = subprocess.Popen(
        [sys.executable, "-m", "codspeed_aggregator.cli", "local", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        for line in process.stdout:
            if line.startswith("Ctrl-C"):
                break
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert process.stdout.read().strip() == "stopped"
    finally:
        process.kill()


def test_started_with_no_mode_a_runner_jobs_part_is_upstream_before_the_next_job_runs_byte_for_byte(tmp_path):
    """``codspeed-aggregator local`` with no mode flag sends each job's part as it lands, as CodSpeed's
    runner does from inside its job: the POST body and archive as the runner sent them."""
    from tests import runner

    upstream = tmp_path / "upstream"
    with local_aggregator("--token", "parts-token", "--upstream-dir", str(upstream)) as stack:
        seconds = []
        for shard in (1, 2):
            archive = runner.folder_archive(runner.valgrind_folder(7200 + shard, [f"local::s{shard}"]), gzipped=True)
            part = runner.github_run_part(
                "9500000001", "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=2
            )
            meta = runner.metadata(
                archive, executor="valgrind", owner="acme", repository="local-parts", commit="b" * 40, run_part=part
            )
            sent_at = time.monotonic()
            up = runner.upload(stack.api_url, runner.Upload(meta, archive, token="parts-token"))
            assert up.post.status_code == 200 and up.put.status_code == 200, up.post.text
            held = wait_for(
                lambda b=up.body: [
                    f
                    for f in upstream.glob("*/post-body.json")
                    if f.read_bytes() == b and (f.parent / "archive.tar.gz").exists()
                ],
                timeout=30,
            )
            seconds.append(time.monotonic() - sent_at)
            assert (held[0].parent / "archive.tar.gz").read_bytes() == archive
            assert len(list(upstream.glob("*/archive.tar.gz"))) == shard  # before the next job exists
        report = wait_for(
            lambda: (
                (
                    r := requests.get(
                        f"{stack.api_url}/v1/runs/acme/local-parts/9500000001",
                        headers={"Authorization": "parts-token"},
                        timeout=10,
                    ).json()
                ).get("state")
                == "forwarded"
                and r
            ),
            timeout=60,
        )
        # the first pays the stack's cold start, as a Lambda's first invocation does (10.3 s once, on a busy machine)
        assert [s["upstream"] for s in report["shards"]] == [True, True] and seconds[1] < 10, (report, seconds)
        print(f"seconds from a job's upload to its part upstream: {', '.join(f'{s:.2f}' for s in seconds)}")


def test_started_with_no_mode_a_forks_tokenless_job_goes_upstream_as_it_came_without_a_token(tmp_path):
    """A fork's pull request has no secrets: its runner job uploads tokenless, and its part goes
    upstream as it sent it, with no Authorization (CodSpeed's own rule for a fork)."""
    from tests import runner

    upstream = tmp_path / "upstream"
    env = {**os.environ, "TOKENLESS_PROJECTS": "acme/fork-parts"}
    with local_aggregator("--token", "fork-token", "--upstream-dir", str(upstream), env=env) as stack:
        archive = runner.folder_archive(runner.valgrind_folder(7300, ["fork::s1"]), gzipped=True)
        part = runner.github_run_part("9500000002", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=1)
        meta = runner.metadata(
            archive,
            executor="valgrind",
            owner="acme",
            repository="fork-parts",
            commit="c" * 40,
            run_part=part,
            tokenless=True,
            event="pull_request",
            ref="refs/pull/5/merge",
            base_ref="main",
        )
        up = runner.upload(stack.api_url, runner.Upload(meta, archive, token=None))
        assert up.post.status_code == 200 and up.put.status_code == 200, up.post.text
        [body] = wait_for(
            lambda: [f for f in upstream.glob("*/post-body.json") if (f.parent / "archive.tar.gz").exists()], timeout=30
        )
        assert body.read_bytes() == up.body and (body.parent / "archive.tar.gz").read_bytes() == archive
        assert "Authorization" not in json.loads((body.parent / "post-headers.json").read_text())


def test_ctrl_c_stops_it_whichever_of_its_threads_the_signal_lands_on():
    """The kernel gives a process's signal to any of its threads that does not block it (under load,
    not always the main one): a SIGINT a server thread took still stops it, and at once."""
    process = subprocess.Popen(
        [sys.executable, "-m", "codspeed_aggregator.cli", "local", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in process.stdout:
            if line.startswith("Ctrl-C"):
                break
        threads = [int(t) for t in os.listdir(f"/proc/{process.pid}/task") if int(t) != process.pid]
        assert threads, "its servers and pollers run in threads of their own"
        os.kill(process.pid, 0)
        _signal_thread(process.pid, threads[0], signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert process.stdout.read().strip() == "stopped"
    finally:
        process.kill()


def _signal_thread(pid: int, tid: int, sig: int) -> None:
    """tgkill(2): a signal to one thread of another process (os.kill lets the kernel choose)."""
    import ctypes
    import platform

    number = {"x86_64": 234, "aarch64": 131}[platform.machine()]
    if ctypes.CDLL(None, use_errno=True).syscall(number, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {sig})")


def test_event_delay_holds_each_s3_event_as_aws_delivers_it_seconds_after_the_put(tmp_path):
    """moto delivers an S3 event at once; on AWS it comes seconds after the PUT: ``--event-delay`` holds
    each one, for a close to be tried against AWS's timing by hand too."""
    refused = subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "local", "--event-delay", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "'soon' is not a number of seconds (0 or more)" in refused.stderr
    with local_aggregator(
        "--token", "delay-token", "--event-delay", "3", "--upstream-dir", str(tmp_path / "up")
    ) as stack:
        env = {**os.environ, "CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": "delay-token"}
        common = ["--project", "acme/delay", "--run-id", "e1", "--commit", "e" * 40]
        folder = make_profile_folder(tmp_path / "shard", 98, ["t::delay"])
        pushed_at = time.monotonic()
        pushed = subprocess.run(
            [sys.executable, "-m", "codspeed_client.cli", "push", "--shard", "1/2", "--wait-upstream", "0"]
            + ["--profile-folder", str(folder), *common],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert pushed.returncode == 0, pushed.stderr

        def arrived() -> int:
            url = f"{stack.api_url}/v1/runs/acme/delay/e1"
            return requests.get(url, headers={"Authorization": "delay-token"}, timeout=10).json()["arrived"]

        assert arrived() == 0  # its event held
        wait_for(lambda: arrived() == 1, timeout=30)
        assert time.monotonic() - pushed_at >= 3
