"""A process new to a big run starts its report from the digest the last published report left
beside it (one S3 object), not from every shard's results, and from what its publisher read of the
ledger, not every shard's item; and never from a digest that counts a bundle the run no longer does.
Against moto's server."""

from dataclasses import replace
from unittest import mock

import pytest

from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.adapters.ledger import Reads
from codspeed_aggregator.adapters.results_store import ResultsStore
from codspeed_aggregator.domain.keys import digest_key, known_key, project_segment
from codspeed_aggregator.services import run_snapshots, shard_summaries
from tests.factories import bundle, push
from tests.requests_seen import dynamodb_requests, item_keys, s3_gets, whole_run_reads

SHARDS = 24
FIRST = 18  # recorded by one process; the rest by another, new to the run (over DIGEST_WORTH either way)
PULL = {"ref": "refs/pull/4/merge", "base_ref": "main"}


def _data(shard: int, cost: int) -> bytes:
    names = [f"t{shard}::a", f"t{shard}::b"]
    return bundle(100 + shard, names, costs={names[0]: cost, names[1]: 1000})


def _main_run(agg, isolated, project, run_id) -> None:
    for shard in range(1, SHARDS + 1):
        agg.record_arrival.record(push(agg, project, run_id, str(shard), _data(shard, 1000), total=SHARDS)["key"])
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"


def _pushed(agg, project, run_id, shards) -> list[str]:
    """The keys of a pull request's shards, each slower than on main by its own amount (+1% to +24%)."""
    return [
        push(agg, project, run_id, str(s), _data(s, 1000 + 10 * s), total=SHARDS + 5, **PULL)["key"] for s in shards
    ]


def _fresh(agg):
    """Another process's arrivals and reports: nothing read of any run yet."""
    reports = replace(
        agg.reports,
        reads=Reads(agg.ledger.table, agg.ledger.db),
        results=ResultsStore(agg.results.bucket, client("s3")),
    )
    return replace(agg.record_arrival, reports=reports), reports


def _whole(agg, project, run_id):
    """The report a process that reads every shard's results builds."""
    _, reports = _fresh(agg)
    with mock.patch.object(shard_summaries, "DIGEST_WORTH", 10**9):
        return reports._build(reports.reads.snapshot(project, run_id))[0]


def _same(a, b) -> None:
    assert a.counts == b.counts and a.benchmarks == b.benchmarks


@pytest.mark.slow
def test_a_process_new_to_a_run_reads_its_digest_and_only_the_results_of_shards_new_since(isolated, project, run_id):
    agg = isolated.aggregator
    _main_run(agg, isolated, project, f"{run_id}-main")
    keys = _pushed(agg, project, run_id, range(1, SHARDS + 1))
    with s3_gets(agg.results.s3, "PutObject") as written:  # the digests are written with the results
        for key in keys[:FIRST]:
            assert agg.record_arrival.record(key) == "recorded"  # each publishes, and leaves its digest
    assert written.count(digest_key(project, run_id)) == FIRST - shard_summaries.DIGEST_WORTH
    assert written.count(known_key(project, run_id)) == 1  # once over 16 shards, then after 16 changes more
    arrivals, reports = _fresh(agg)
    own = f"results/{project_segment(project)}/{run_id}/"
    with s3_gets(client("s3")) as seen, dynamodb_requests(agg.ledger.db) as asked:
        with reports.held():
            for key in keys[FIRST:]:
                assert arrivals.record(key) == "recorded"
    assert seen.count(digest_key(project, run_id)) == 1
    # and of the ledger, what the last publishers read: of the run, and of its baseline (main's, forwarded)
    assert seen.count(known_key(project, run_id)) == 1 and seen.count(known_key(project, f"{run_id}-main")) == 1
    assert whole_run_reads(asked) == 0  # neither the run's shards nor the baseline's, only the batch's
    batch, read = {f"SHARD#{s}" for s in range(FIRST + 1, SHARDS + 1)}, set(item_keys(asked))
    assert batch <= read and len(read - batch) < run_snapshots.KNOWN_EVERY  # and those changed since the read left
    assert (
        len([k for k in seen if k.startswith(own)]) == SHARDS - FIRST
    )  # the batch's; every shard's without the digest
    report = reports.report(project, run_id)
    assert report.arrived == SHARDS and report.counts.measured == 2 * SHARDS
    assert report.counts.regressions == SHARDS - 5  # +6% and more: past the 5% threshold
    assert report.benchmarks[0].name == f"t{SHARDS}::a" and round(report.benchmarks[0].change, 2) == 0.24
    _same(report, _whole(agg, project, run_id))


@pytest.mark.slow
def test_a_digest_that_counted_a_bundle_the_run_no_longer_counts_is_not_used(isolated, project, run_id):
    agg = isolated.aggregator
    _main_run(agg, isolated, project, f"{run_id}-main")
    for key in _pushed(agg, project, run_id, range(1, FIRST + 1)):
        assert agg.record_arrival.record(key) == "recorded"
    arrivals, reports = _fresh(agg)
    [again] = _pushed(agg, project, run_id, [3])  # shard 3 uploaded again: the digest counted its first bundle
    with s3_gets(client("s3")) as seen:
        assert arrivals.record(again) == "recorded"
    own = f"results/{project_segment(project)}/{run_id}/"
    assert seen.count(digest_key(project, run_id)) == 1 and len([k for k in seen if k.startswith(own)]) == FIRST
    report = reports.report(project, run_id)
    assert report.arrived == FIRST and report.counts.measured == 2 * FIRST  # shard 3's benchmarks counted once
    _same(report, _whole(agg, project, run_id))


@pytest.mark.slow
def test_a_small_run_leaves_no_digest_and_a_cold_process_reads_its_shards(isolated, project, run_id):
    agg = isolated.aggregator
    for key in _pushed(agg, project, run_id, range(1, shard_summaries.DIGEST_WORTH + 1)):
        assert agg.record_arrival.record(key) == "recorded"
    assert agg.results.read_digest(project, run_id) is None  # one round of reads: a digest would spare nothing
    assert agg.results.read_known(project, run_id) is None
    _same(agg.reports.report(project, run_id), _whole(agg, project, run_id))
