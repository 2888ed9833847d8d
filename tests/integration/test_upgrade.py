"""A release reads what the release before it wrote (CHANGELOG.md, "Upgrading"): the previous
release's own code, from a worktree of its commit, writes a run in flight into the stack's table,
bucket and queues, as a deployment it is replaced under would have left it; this code then takes
it on and finishes it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codspeed_aggregator.domain.keys import run_bundles_prefix
from codspeed_local.upstream_stub import archive_of, benchmarks_in

ROOT = Path(__file__).resolve().parents[2]


def previous_release() -> tuple[str, str]:
    """The latest release CHANGELOG.md names, and its commit: ``## 1.0.0 (2026-12-05, commit a97badf)``."""
    found = re.search(
        r"^## (\d+\.\d+\.\d+) \([^)]*commit ([0-9a-f]{7,40})\)", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    assert found, "CHANGELOG.md names no release commit: '## X.Y.Z (date, commit SHA)'"
    return found[1], found[2]


def missing(version: str, commit: str) -> str | None:
    """Why the release's code cannot be had here, in a sentence; None when this clone holds it."""
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if known.returncode == 0:
        return None
    return (
        f"release {version}'s commit {commit} is not in this clone (a shallow one?): "
        "'git fetch --unshallow' brings it, and this test writes with its code"
    )


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> tuple[str, Path]:
    """A worktree of the previous release's commit; a clone without it fails here with a sentence."""
    version, commit = previous_release()
    if why := missing(version, commit):
        shallow = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"], capture_output=True, text=True
        )
        if shallow.stdout.strip() == "true":  # a CI's shallow checkout: said in the run's summary, not a failure
            pytest.skip(why)
        pytest.fail(why)  # a whole history without it: the release's record is wrong
    folder = tmp_path_factory.mktemp("release") / version
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), commit], check=True, capture_output=True
    )
    yield version, folder
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], capture_output=True)


OLD_WRITER = """
import sys
from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.adapters.bucket import Bucket
from codspeed_aggregator.adapters.ledger import Ledger
from codspeed_aggregator.adapters.queues import FinalizeQueue, Queue
from codspeed_aggregator.adapters.results_store import ResultsStore
from codspeed_aggregator.settings import Settings
from codspeed_aggregator.use_cases import Aggregator
from tests.factories import bundle, push
import codspeed_aggregator, codspeed_client

settings = Settings.from_env()
agg = Aggregator(
    settings=settings,
    ledger=Ledger.on(settings.table_name, client("dynamodb")),
    store=Bucket(settings.bucket_name, client("s3")),
    results=ResultsStore(settings.bucket_name, client("s3")),
    queue=FinalizeQueue(settings.finalize_queue_url, client("sqs")),
    arrivals_queue=Queue(settings.arrivals_queue_url, client("sqs"), settings.arrivals_dead_letter_url),
)
project, run_id = sys.argv[1:3]
for shard in ("1", "2"):
    key = push(agg, project, run_id, shard, bundle(100 + int(shard), [f"t{shard}::old"]), total=3)["key"]
    assert agg.record_arrival.record(key) == "recorded"
push(agg, project, run_id, "3", bundle(103, ["t3::granted"]), total=3)  # granted and PUT, its event still queued
print(codspeed_aggregator.__file__, codspeed_client.__version__)
"""


def test_a_run_the_previous_release_left_in_flight_is_finished_by_this_one(released, isolated, project, run_id):
    version, folder = released
    resources, settings = isolated.resources, isolated.aggregator.settings
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(folder / p) for p in ("functions", "client", "local", ".")),
        "TABLE_NAME": resources.table,
        "BUCKET_NAME": resources.bucket,
        "FINALIZE_QUEUE_URL": resources.finalize_queue_url,
        "ARRIVALS_QUEUE_URL": resources.arrivals_queue_url,
        "ARRIVALS_DEAD_LETTER_QUEUE_URL": resources.arrivals_dlq_url,
        "FORWARD_MODE": settings.forward_mode,
    }
    wrote = subprocess.run(
        [sys.executable, "-c", OLD_WRITER, project, run_id], env=env, capture_output=True, text=True, timeout=120
    )
    assert wrote.returncode == 0, wrote.stderr[-3000:]
    module, old_version = wrote.stdout.split()
    assert module.startswith(str(folder)) and old_version == version  # the release's own code wrote it

    agg = isolated.aggregator
    granted = agg.ledger.reads.snapshot(project, run_id)
    assert granted.run.state == "open" and sorted(granted.arrived()) == ["1", "2"]
    third = [k for k in agg.store.listed_under(run_bundles_prefix(project, run_id)) if "/3/" in k]
    assert len(third) == 1 and agg.record_arrival.record(third[0]) == "recorded"  # its event, taken by this release
    assert isolated.finalize_all(project, run_id) == "forwarded"
    report = agg.reports.report(project, run_id)
    assert (report.state, report.arrived, report.expected) == ("forwarded", 3, 3)
    sent = {b for upload in isolated.upstream.uploads(run_id) for b in benchmarks_in(archive_of(upload))}
    assert sent == {"t1::old", "t2::old", "t3::granted"}


def test_a_clone_without_the_release_s_commit_is_told_so_in_a_sentence():
    assert missing("9.9.9", "0" * 40) == (
        f"release 9.9.9's commit {'0' * 40} is not in this clone (a shallow one?): "
        "'git fetch --unshallow' brings it, and this test writes with its code"
    )
