"""What is under way when a release deploys goes on as it began: a run whose runner jobs were keyed
before job keys (``drop_in.job_key``) keeps their keys, so a job that uploads again lands on its own
shard and the run gets no second part of it. The state before is the one the earlier release wrote:
a run item with no ``job_keys`` and its jobs under their ``safe_key``."""

import json
import uuid

import pytest
import requests

from codspeed_aggregator.adapters.ledger.runs import Runs
from codspeed_aggregator.domain.drop_in import job_key, safe_key
from codspeed_wire.upstream import UploadMetadata
from tests import runner
from tests.factories import put

COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def _key_of(upload_url: str) -> str:
    return requests.utils.unquote(requests.utils.urlparse(upload_url).path.split("/", 2)[2])


def _job(agg, project: str, workflow: str, shard: int, benchmark: str, pid: int) -> str:
    """A matrix job of 2 of the workflow uploads (POST, PUT) and is counted; answers its label."""
    archive = runner.folder_archive(runner.valgrind_folder(pid, [benchmark]), gzipped=True)
    part = runner.github_run_part(
        workflow, "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=2
    )
    meta = runner.metadata(
        archive,
        executor="valgrind",
        owner=project.split("/")[0],
        repository=project.split("/")[1],
        commit=COMMIT,
        run_part=part,
    )
    accepted = agg.request_upload.accept_drop_in(UploadMetadata.model_validate(meta))
    put({"upload_url": accepted.uploadUrl, "headers": {"Content-MD5": meta["profileMd5"]}}, archive)
    agg.record_arrival.record(_key_of(accepted.uploadUrl))
    return part["runPartId"]


@pytest.fixture
def before_job_keys(monkeypatch):
    """The release before: runs opened with no ``job_keys`` (so their jobs keyed as it keyed them)."""
    open_run = Runs.open_run

    def as_before(self, run):
        run.job_keys = False
        return open_run(self, run)

    monkeypatch.setattr(Runs, "open_run", as_before)
    return monkeypatch


def test_a_run_opened_before_job_keys_keeps_its_jobs_keys_to_its_end(isolated, project, before_job_keys):
    agg, workflow = isolated.aggregator, str(9_100_000_000 + uuid.uuid4().int % 1_000_000)
    first = _job(agg, project, workflow, 1, "s1::first", 6001)
    item = agg.ledger.reads.db.get_item(
        TableName=agg.settings.table_name, Key={"pk": {"S": f"RUN#{project}#{workflow}"}, "sk": {"S": "RUN"}}
    )["Item"]
    assert "job_keys" not in item  # as the earlier release wrote it
    assert set(agg.ledger.reads.snapshot(project, workflow).shards) == {safe_key(first)}
    before_job_keys.undo()  # deployed: the run is still open

    assert _job(agg, project, workflow, 1, "s1::again", 6002) == first  # job 1 re-run before the run ended
    _job(agg, project, workflow, 2, "s2::only", 6003)
    snapshot = agg.ledger.reads.snapshot(project, workflow)
    assert set(snapshot.shards) == {safe_key(first), safe_key(_label(workflow, 2))}  # each job once, as keyed before
    assert snapshot.run.group_counts == {"bench": 2}
    assert isolated.finalize_all(project, workflow) == "forwarded"
    [part] = isolated.upstream.combined(project)[(project, workflow)].values()
    meta = json.loads((part / "metadata.json").read_text())
    assert len(meta["runPart"]["metadata"]["aggregatedShards"]) == 2 and not isolated.upstream.benchmarks_twice(project)

    fresh = str(int(workflow) + 1)  # a run opened after the deploy keys its jobs apart from any pushed name
    label = _job(agg, project, fresh, 1, "s1::fresh", 6004)
    assert set(agg.ledger.reads.snapshot(project, fresh).shards) == {job_key(label)}


def _label(workflow: str, shard: int) -> str:
    return runner.github_run_part(
        workflow, "bench", "valgrind", matrix={"shard": shard}, job_index=shard - 1, job_total=2
    )["runPartId"]
