"""A project switching forward modes, either way, at any age of its baseline's bundles: a shard it
skips is carried, and no run fails for a bundle the lifecycle expired. S3's lifecycle is played by
deleting what its rules would have deleted by then (a parts run's bundles: two days, their
noncurrent versions a day later). Against moto's server and the stand-in upstream."""

import json
from dataclasses import replace

import pytest

from codspeed_aggregator.domain.baseline import BUNDLE_EXPIRED
from codspeed_aggregator.domain.keys import run_bundles_prefix
from codspeed_local.upstream_stub import archive_of, benchmarks_in
from codspeed_wire.api import CloseRequest
from tests.factories import bundle, push

PR = {"ref": "refs/pull/7/merge", "baseRef": "main"}


def _in_mode(isolated, mode: str):
    isolated.finalize_requests()
    return replace(isolated.aggregator, settings=replace(isolated.aggregator.settings, forward_mode=mode))


def _run(isolated, agg, project, run_id, benchmarks: dict[str, str], skip=(), **refs) -> str:
    """A run that measures ``benchmarks`` (one a shard), skips ``skip``, is closed and finalized."""
    for name, benchmark in benchmarks.items():
        key = push(agg, project, run_id, name, bundle(4300 + int(name), [benchmark]), total=3, **refs)["key"]
        agg.record_arrival.record(key)
        if agg.settings.forward_mode == "parts":
            assert agg.forward_shard.forward(project, run_id, name) == "forwarded"
    if skip:
        agg.close_run.close(CloseRequest(project=project, run_id=run_id, skip=list(skip)))
    return isolated.finalize_all(project, run_id, agg)


def _expire(agg, project, run_id) -> int:
    """What S3's lifecycle has deleted by day 3 of a run's bundles: every version."""
    s3, bucket = agg.store.s3, agg.store.bucket
    listed = s3.list_object_versions(Bucket=bucket, Prefix=run_bundles_prefix(project, run_id))
    versions = [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]
    for v in versions:
        s3.delete_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
    return len(versions)


def _upstream_benchmarks(isolated, run_id) -> set[str]:
    return {b for u in isolated.upstream.uploads(run_id) for b in benchmarks_in(archive_of(u))}


def _shard(agg, project, run_id, name):
    return {s.name: s for s in agg.reports.report(project, run_id).shards}[name]


@pytest.mark.parametrize("day", [0, 3])
def test_parts_to_one_upload_carries_a_skipped_shard_and_sends_its_bundle_only_while_the_bucket_holds_it(
    isolated, project, run_id, day
):
    """The case seen: a parts run became main's baseline, the project moved to one-upload, and its
    next run skipping a shard failed for good (MissingObject) once the parts bundles expired."""
    parts, merged = _in_mode(isolated, "parts"), _in_mode(isolated, "one-upload")
    main = f"main-{run_id}"
    assert _run(isolated, parts, project, main, {"1": "t1::main", "2": "t2::main", "3": "t3::main"}) == "forwarded"
    if day == 3:
        assert _expire(parts, project, main) == 3

    assert _run(isolated, merged, project, run_id, {"1": "t1::pr", "2": "t2::pr"}, skip=["3"], **PR) == "forwarded"
    carried = _shard(merged, project, run_id, "3")
    assert carried.state == "carried" and carried.source["run_id"] == main
    [upload] = isolated.upstream.uploads(run_id)
    listed = json.loads((upload / "metadata.json").read_text())["runPart"]["metadata"].get("carriedShards")
    if day == 0:  # in the upload, named as carried
        assert _upstream_benchmarks(isolated, run_id) == {"t1::pr", "t2::pr", "t3::main"}
        assert BUNDLE_EXPIRED not in carried.reason
        assert listed == {"3": {"runId": main, "commitHash": carried.source["commit"]}}
    else:  # left to CodSpeed's baseline, and said
        assert _upstream_benchmarks(isolated, run_id) == {"t1::pr", "t2::pr"}
        assert carried.reason.endswith(f"; {BUNDLE_EXPIRED}") and listed is None
    report = merged.reports.report(project, run_id)
    assert (report.state, report.arrived, report.carried) == ("forwarded", 2, 1)
    assert not [s.name for s in report.shards if s.state == "missing"]  # nor a gate failed for it


def test_every_later_run_of_the_branch_that_skips_the_expired_shard_is_forwarded(isolated, project, run_id):
    """The branch's next runs carry the shard from the copy its first one-upload run kept: results
    only (there was no bundle to copy), so each leaves it out of its upload and is forwarded."""
    parts, merged = _in_mode(isolated, "parts"), _in_mode(isolated, "one-upload")
    first, second, third = (f"main-{i}-{run_id}" for i in (1, 2, 3))
    assert _run(isolated, parts, project, first, {"1": "t1::a", "2": "t2::a", "3": "t3::a"}) == "forwarded"
    _expire(parts, project, first)
    for later in (second, third):
        assert _run(isolated, merged, project, later, {"1": "t1::b", "2": "t2::b"}, skip=["3"]) == "forwarded"
        carried = _shard(merged, project, later, "3")
        assert carried.state == "carried" and carried.source["run_id"] == first
        assert carried.reason.endswith(BUNDLE_EXPIRED)
    [(name, kept)] = merged.ledger.sources.kept(project, second).items()
    assert name == "3" and merged.results.read(kept.shard.key).names == ["t3::a"]  # its results, for the report


@pytest.mark.parametrize("expired", [False, True])
def test_one_upload_to_parts_never_reads_a_carried_bundle(isolated, project, run_id, expired):
    """A parts run leaves a skipped shard to CodSpeed's baseline whatever the age of the one-upload
    run it is carried from: it reads that shard's results, never its bundle."""
    parts, merged = _in_mode(isolated, "parts"), _in_mode(isolated, "one-upload")
    main = f"main-{run_id}"
    assert _run(isolated, merged, project, main, {"1": "t1::main", "2": "t2::main", "3": "t3::main"}) == "forwarded"
    if expired:
        assert _expire(merged, project, main) == 3

    assert _run(isolated, parts, project, run_id, {"1": "t1::pr", "2": "t2::pr"}, skip=["3"], **PR) == "forwarded"
    carried = _shard(parts, project, run_id, "3")
    assert carried.state == "carried" and carried.source["run_id"] == main and carried.benchmarks == 1
    assert BUNDLE_EXPIRED not in carried.reason  # a parts run never sends a carried shard: nothing to say
    assert _upstream_benchmarks(isolated, run_id) == {"t1::pr", "t2::pr"}


def test_a_one_upload_forward_retried_after_its_carried_bundles_expired_is_planned_again_and_forwarded(
    isolated, project, run_id
):
    """Before: every retry and redrive reused the recorded plan, and failed for good (MissingObject) once
    the lifecycle took the bundles it carried while the upstream was down."""
    from codspeed_aggregator.adapters.upstream_http import UpstreamError

    parts, merged = _in_mode(isolated, "parts"), _in_mode(isolated, "one-upload")
    main = f"main-{run_id}"
    assert _run(isolated, parts, project, main, {"1": "t1::main", "2": "t2::main", "3": "t3::main"}) == "forwarded"
    isolated.upstream.failures.extend([500, 500, 500])
    with pytest.raises(UpstreamError, match="after 3 tries"):
        _run(isolated, merged, project, run_id, {"1": "t1::pr"}, skip=["2", "3"], **PR)
    assert merged.reports.report(project, run_id).state == "forward_failed"
    assert _expire(parts, project, main) == 3  # days later: the lifecycle took what the plan carries
    assert merged.finalize_run.finalize(project, run_id) == "forwarded"  # the same message, retried
    assert _upstream_benchmarks(isolated, run_id) == {"t1::pr"}
    for name in ("2", "3"):
        carried = _shard(merged, project, run_id, name)
        assert carried.state == "carried" and carried.reason.endswith(f"; {BUNDLE_EXPIRED}")
