"""Every record of the ledger stays under DynamoDB's 400 KB at the limits we state: 1000 shards
(``MAX_SHARDS``), the longest name, job key and ref we accept, 256 KiB bodies counted in bytes.
Each record is written at its largest through the adapter that writes it, on moto's server (which
refuses an item over 400 KB as DynamoDB does), and measured by DynamoDB's own rules of an item's size
(``bench/billing.py``'s, which bills by them)."""

import sys
from pathlib import Path

import pytest

from codspeed_aggregator.adapters.ledger.codec import CARRIED_PREFIX, RUN_SK, TALLY_PREFIX, load
from codspeed_aggregator.domain.baseline import MAX_LISTED_BYTES
from codspeed_aggregator.domain.errors import Unprocessable
from codspeed_aggregator.domain.forward_plan import MAX_RUN_IDS_BYTES
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_aggregator.domain.outcome import CarriedShard, Outcome
from codspeed_aggregator.domain.records import (
    FINALIZING,
    FORWARDED,
    MAX_GROUPS,
    MAX_VARIANTS,
    RunRecord,
    SentPost,
)
from codspeed_wire.api import MAX_SHARDS, CloseRequest
from codspeed_wire.upstream import UploadMetadata
from tests import runner
from tests.factories import bundle, footprint, push

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from billing import item_size as item_bytes  # noqa: E402 -- DynamoDB's rules of an item's size, as the bill counts them
from record_sizes import longest, partition, write_largest  # noqa: E402 -- the largest run, as the benchmark writes it

DYNAMODB_ITEM_LIMIT = 400 * 1024


def test_a_run_at_every_limit_finishes_carrying_its_shards_beside_it_and_each_record_is_under_400_kb(
    isolated, project, run_id
):
    ledger = isolated.aggregator.ledger
    written = write_largest(ledger, project, run_id)  # bench/record_sizes.py's run: make bench-smoke measures it too
    carried, gone, runs = written["carried"], written["gone"], written["runs"]

    items = partition(ledger, project, run_id)
    sizes = {sk: item_bytes(item) for sk, item in items.items()}
    assert max(sizes.values()) < DYNAMODB_ITEM_LIMIT, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    assert sum(sk.startswith(CARRIED_PREFIX) for sk in items) == len(carried)
    snapshot = ledger.reads.snapshot(project, run_id)
    assert snapshot.run.state == FORWARDED and snapshot.run.outcome.carried == carried
    assert load(items[RUN_SK])["outcome"]["carried_shards"] == len(carried)
    fit = MAX_LISTED_BYTES // len(gone[0].encode())  # names of 4 KB: the rest are counted, not listed
    assert snapshot.run.outcome.missing_benchmarks == tuple(gone[:fit]) and fit == 8
    said = snapshot.run.forward.upstream
    assert said is not None and said.run_id is not None
    assert said.run_ids == 100_000 and said.run_id.split(",") == runs.distinct[: len(runs.kept)]
    assert 0 < len(said.run_id.encode()) <= MAX_RUN_IDS_BYTES
    assert load(items[RUN_SK])["group_count"] == MAX_GROUPS and load(items[RUN_SK])["variant_count"] == MAX_VARIANTS


def test_a_tally_counting_every_group_and_the_metadata_of_a_256_kib_post_fit_their_items(isolated, project, run_id):
    ledger = isolated.aggregator.ledger
    body = ('{"k":"' + "€" * (256 * 1024 // 3 - 4) + '"}').encode()
    assert len(body) <= 256 * 1024
    ledger.shards.keep_metadata(project, run_id, "u" * 32, {}, SentPost(body, "codspeed-runner", "t" * 8000, 2**40))
    counts = ", ".join(f"#c{i} :one" for i in range(MAX_GROUPS))
    ledger.db.update_item(  # every group's count on one tally: the most shards of every group land there
        TableName=ledger.table,
        Key={"pk": {"S": f"RUN#{project}#{run_id}"}, "sk": {"S": f"{TALLY_PREFIX}00"}},
        UpdateExpression=f"ADD {counts}, rev :one",
        ExpressionAttributeNames={f"#c{i}": f"C#{longest('job', i, 89)}!0123456789" for i in range(MAX_GROUPS)},
        ExpressionAttributeValues={":one": {"N": str(MAX_SHARDS)}},
    )
    sizes = {sk: item_bytes(item) for sk, item in partition(ledger, project, run_id).items()}
    assert all(size < DYNAMODB_ITEM_LIMIT for size in sizes.values()), sizes
    assert max(sizes.values()) > 256 * 1024  # the POST's bytes, kept as they came


def test_a_finishing_run_is_left_finalizing_by_nothing_its_item_cannot_hold(isolated, project, run_id):
    """The case seen: 999 carried shards of 80-character names made the run item too large to write."""
    ledger = isolated.aggregator.ledger
    names = tuple(longest("s", i, 80) for i in range(MAX_SHARDS))
    ledger.runs.open_run(
        RunRecord(project=project, run_id=run_id, groups={"": Manifest(names=names)}, skipped=names[1:])
    )
    assert ledger.runs.claim_finalize(project, run_id, 1, 60, grants=0)
    carried = {name: CarriedShard(run_id="main-1", commit="d" * 40, branch="main", key="k" * 200) for name in names[1:]}
    assert ledger.runs.finish(project, run_id, FORWARDED, outcome=Outcome(carried=carried))
    run = ledger.reads.snapshot(project, run_id).run
    assert run.state == FORWARDED != FINALIZING and run.outcome.carried == carried


def _job(project: str, run_id: str, job: str) -> UploadMetadata:
    owner, repository = project.rsplit("/", 1)
    sent = runner.metadata(
        runner.recorded(1),
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit="a" * 40,
        run_part=runner.github_run_part(run_id, job, "valgrind"),
    )
    return UploadMetadata.model_validate(sent)


def test_a_job_past_the_most_a_run_holds_is_refused_naming_the_limit_and_changes_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    for i in range(MAX_GROUPS):
        agg.runner_upload.accept(_job(project, run_id, f"bench-{i}"))
    before = footprint(isolated, project, run_id)
    with pytest.raises(Unprocessable) as refused:
        agg.runner_upload.accept(_job(project, run_id, "one-more"))
    assert str(refused.value) == (
        f"run {run_id} of {project} holds {MAX_GROUPS} jobs, the most a run holds ({MAX_GROUPS}; a matrix is one): "
        "job one-more cannot join it"
    )
    assert footprint(isolated, project, run_id) == before
    agg.runner_upload.accept(_job(project, run_id, "bench-7"))  # a job it holds still uploads


def test_a_close_stores_each_skipped_name_once_however_often_it_is_named(isolated, project, run_id):
    """Each attempt starts with its previous one's skips: appending them again grew the list with every close."""
    agg = isolated.aggregator
    push(agg, project, run_id, "1", bundle(), expect=["1", "2", "3"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=["2", "3", "2"]))
    item = agg.ledger.db.get_item(TableName=agg.ledger.table, Key=agg.ledger.runs.key(project, run_id, RUN_SK))["Item"]
    assert load(item)["skipped"] == ["2", "3"]


def test_a_close_past_1000_skipped_shards_is_refused_naming_the_count_and_changes_nothing(isolated, project, run_id):
    """A run's skips grow with its attempts, each starting with its previous one's: 1000 in all at most."""
    agg = isolated.aggregator
    names = tuple(str(i) for i in range(1, MAX_SHARDS + 2))
    agg.ledger.runs.open_run(
        RunRecord(project=project, run_id=run_id, groups={"": Manifest(names=names)}, skipped=names[:MAX_SHARDS])
    )
    before = footprint(isolated, project, run_id)
    with pytest.raises(Unprocessable) as refused:
        agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=[names[-1]]))
    assert (
        str(refused.value) == f"run {run_id} of {project} would skip {MAX_SHARDS + 1} shards: a run skips 1000 at most"
    )
    assert footprint(isolated, project, run_id) == before
