"""The failure modes an attack on the stack found (hangs, losses, unchecked bytes), each
reproduced here: every test fails on the code before its fix."""

import io
import subprocess
import tarfile
from dataclasses import replace
from unittest import mock

import pytest

from codspeed_aggregator.adapters.upstream_http import UpstreamError, UpstreamRefused
from codspeed_aggregator.domain.errors import BadBundle
from codspeed_aggregator.domain.part_answers import Announced
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from tests.factories import bundle, profile_members, put, tar_gz, upload_request


def _push(agg, project, run_id, shard, data, **kwargs) -> dict:
    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs))
    )
    put(grant.model_dump(), data)
    return grant.model_dump()


def _state(agg, project, run_id):
    return agg.ledger.reads.snapshot(project, run_id).run


# -- hangs ---------------------------------------------------------------------------------


def test_a_finalize_failing_for_any_reason_ends_forward_failed_with_it_and_is_retried(isolated, project, run_id):
    agg = isolated.aggregator
    for shard in ("1", "2"):
        agg.record_arrival.record(_push(agg, project, run_id, shard, bundle(), total=2)["key"])
    isolated.finalize_requests()
    with mock.patch(
        "codspeed_aggregator.use_cases.forward_part.splice", side_effect=OverflowError("cannot convert float infinity")
    ):
        with pytest.raises(OverflowError):
            agg.finalize_run.finalize(project, run_id)
    run = _state(agg, project, run_id)
    assert (
        run.state == "forward_failed"
        and run.forward.error == "finalizing failed: OverflowError: cannot convert float infinity"
    )
    report = agg.reports.report(project, run_id)
    assert report.state == "forward_failed" and "OverflowError" in report.upstream.message
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # SQS delivers the message again
    assert len(isolated.upstream.uploads(run_id)) == 1


def test_the_report_says_finalizing_while_the_run_is(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(_push(agg, project, run_id, "1", bundle(), total=1)["key"])
    seen = []
    original = agg.upstream.announce

    def announce(metadata):
        seen.append(agg.reports.report(project, run_id).state)
        return original(metadata)

    with mock.patch.object(agg.upstream, "announce", announce):
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert seen == ["finalizing"]


def test_a_run_whose_finalizer_died_is_finalized_again_once_its_lease_runs_out(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(_push(agg, project, run_id, "1", bundle(), total=1)["key"])
    isolated.finalize_requests()
    assert agg.ledger.runs.claim_finalize(
        project,
        run_id,
        int(agg.clock()),
        agg.settings.finalize_lease_seconds,
        grants=agg.ledger.runs.run_record(project, run_id).grants,
    )  # then it died
    assert agg.finalize_run.finalize(project, run_id) == "not_claimed"  # a redelivery within the lease leaves it alone
    assert not [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    agg.sweep_deadlines.sweep()
    assert not [m for m in isolated.finalize_requests() if m["run_id"] == run_id]  # the lease still runs
    later = replace(agg, clock=lambda: agg.clock() + agg.settings.finalize_lease_seconds + 5)
    later.sweep_deadlines.sweep()
    assert [m["reason"] for m in isolated.finalize_requests() if m["run_id"] == run_id] == ["lease-expired"]
    assert later.finalize_run.finalize(project, run_id) == "forwarded" and len(isolated.upstream.uploads(run_id)) == 1
    later.sweep_deadlines.sweep()
    assert not [m for m in isolated.finalize_requests() if m["run_id"] == run_id]  # a finished run is left alone


def test_colliding_ten_digit_pids_are_renumbered_without_hanging(isolated, project, run_id):
    agg = isolated.aggregator
    for shard in ("1", "2"):
        agg.record_arrival.record(_push(agg, project, run_id, shard, bundle(9_999_999_999), total=2)["key"])
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    [upload] = isolated.upstream.uploads(run_id)
    with tarfile.open(upload / "archive.tar.gz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".out")) == ["./1000000000.out", "./9999999999.out"]


# -- what validation refuses before the merge could choke on it ----------------------------


def _raw_header(name: str, kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.USTAR_FORMAT)


@pytest.mark.parametrize("kind, what", [(tarfile.XHDTYPE, "PAX"), (tarfile.GNUTYPE_LONGNAME, "GNU long name")])
def test_a_tar_header_bomb_is_refused_before_it_is_read(isolated, project, run_id, kind, what):
    import gzip
    import resource

    data = gzip.compress(_raw_header("././@Header", kind, 100 << 20) + b"\0" * 4096)  # claims 100 MiB, sends 4 KiB
    agg = isolated.aggregator
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    grant = _push(agg, project, run_id, "1", data, total=2)
    assert agg.record_arrival.record(grant["key"]) == "rejected"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB: nothing near 100 MiB was read
    reason = agg.reports.report(project, run_id).shards[0].reason
    assert reason == "a tar extended header (PAX or GNU long name) of 104857600 bytes is over the 64 KiB limit", what


@pytest.mark.parametrize("mtime", ["inf", "nan", "1e30", "-5"])
def test_a_member_time_the_merge_could_not_write_is_refused(mtime):
    from codspeed_aggregator.domain.bundle import validate_bundle

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, content in profile_members(7, ["a"]).items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            if name.endswith(".map"):
                info.pax_headers = {"mtime": mtime}
            tar.addfile(info, io.BytesIO(content))
    with pytest.raises(BadBundle, match=r"perf-7.map' has a modification time out of range"):
        validate_bundle(io.BytesIO(raw.getvalue()))


def test_a_sparse_member_and_a_zero_padded_pid_are_refused():
    from codspeed_aggregator.domain.bundle import validate_bundle

    sparse = tarfile.TarInfo("./big.bin")
    sparse.type = tarfile.GNUTYPE_SPARSE
    members = {**profile_members(7, ["a"]), "./big.bin": sparse}
    with pytest.raises(BadBundle, match="'./big.bin' is a sparse file"):
        validate_bundle(io.BytesIO(tar_gz(members)))
    padded = profile_members(77, ["a"])
    padded["./77.out"] = padded["./77.out"].replace(b"\npid: 77\n", b"\npid: 0077\n")
    with pytest.raises(BadBundle, match="77.out writes its pid as 'pid: 0077', not as 'pid: 77'"):
        validate_bundle(io.BytesIO(tar_gz(padded)))


# -- merged output that GNU tar extracts to exactly what the report lists --------------------


def test_a_path_that_is_a_file_in_one_shard_and_a_folder_in_another_keeps_both(tmp_path):
    from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles

    folder = tarfile.TarInfo("./extra")
    folder.type = tarfile.DIRTYPE
    first = tar_gz({**profile_members(7, ["a"]), "./extra": b"a file named extra"})
    second = tar_gz({**profile_members(8, ["b"]), "./extra": folder, "./extra/inside.txt": b"inside a folder"})

    def shard(name, data):
        return ShardBundle(name, (7,) if name == "1" else (8,), lambda: io.BytesIO(data))

    out = io.BytesIO()
    result = merge_bundles([shard("1", first), shard("2", second)], out)
    archive = tmp_path / "merged.tar.gz"
    archive.write_bytes(out.getvalue())
    target = tmp_path / "x"
    target.mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(target)], check=True)
    extracted = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert extracted == sorted(m for m in result.members if (target / m).is_file())
    assert (target / "extra").read_bytes() == b"a file named extra"
    assert (target / "shard-2/extra/inside.txt").read_bytes() == b"inside a folder"


def test_setuid_bits_never_reach_the_merged_archive():
    from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, content in {**profile_members(7, ["a"]), "./tool": b"#!/bin/sh\n"}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o6755 if name == "./tool" else 0o644
            tar.addfile(info, io.BytesIO(content))
    out = io.BytesIO()
    merge_bundles([ShardBundle("1", (7,), lambda: io.BytesIO(raw.getvalue()))], out)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        assert tar.getmember("./tool").mode == 0o755


# -- losses ----------------------------------------------------------------------------------


def test_a_retried_forward_asks_for_a_new_upload_url_when_the_old_one_is_dead(isolated, project, run_id):
    agg = isolated.aggregator
    key = _push(agg, project, run_id, "1", bundle(), total=1)["key"]
    agg.record_arrival.record(key)
    now = int(agg.clock())
    assert agg.ledger.runs.claim_finalize(
        project, run_id, now, 0, grants=agg.ledger.runs.run_record(project, run_id).grants
    )  # an earlier finalizer announced, then died before its PUT
    _, md5 = agg.store.reader(key).digest()
    expired = f"{isolated.upstream.url}/archive/expired"  # the stand-in answers 404 there, as a dead URL answers 403
    agg.ledger.parts.record_announced_part(project, run_id, 0, Announced("gone", expired, md5))
    assert replace(agg, clock=lambda: now + 5).finalize_run.finalize(project, run_id) == "forwarded"
    [upload] = isolated.upstream.uploads(run_id)
    assert _state(agg, project, run_id).forward.upstream.run_id == upload.name


def test_a_refusal_of_a_fresh_upload_url_is_not_retried_forever(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(_push(agg, project, run_id, "1", bundle(), total=1)["key"])
    with mock.patch.object(agg.upstream, "put", side_effect=UpstreamRefused("PUT answered 403")):
        with pytest.raises(UpstreamError, match="PUT answered 403"):
            agg.finalize_run.finalize(project, run_id)
    assert _state(agg, project, run_id).state == "forward_failed"


def test_a_grant_once_the_run_is_claimed_goes_to_its_next_attempt(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(_push(agg, project, run_id, "1", bundle(), total=3)["key"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # nothing else was granted: no wait
    later = _push(agg, project, run_id, "2", bundle(), total=3)
    assert (later["run_id"], later["attempt"]) == (f"{run_id}~2", 2)


# -- bytes nobody validated --------------------------------------------------------------------


def test_a_bundle_swapped_through_its_own_upload_url_is_never_merged(isolated, project, run_id):
    agg = isolated.aggregator
    good = bundle(4242, ["tests/a.py::validated"])
    grant = _push(agg, project, run_id, "1", good, total=1)
    assert agg.record_arrival.record(grant["key"]) == "recorded"
    fifo = tarfile.TarInfo("./pipe")
    fifo.type = tarfile.FIFOTYPE
    swapped = tar_gz({"./4242.out": b"# callgrind format\nno pid line\n", "./pipe": fifo})
    put(grant, swapped)  # the URL is still valid; the signed checksum is no MAC (and moto checks none)
    assert agg.record_arrival.record(grant["key"]) == "duplicate"  # its event is absorbed before any download
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    [upload] = isolated.upstream.uploads(run_id)
    assert (upload / "archive.tar.gz").read_bytes() == good  # one shard: forwarded as sent, the version validated


def test_the_merge_itself_refuses_a_member_that_is_not_a_file_or_a_folder():
    from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles

    fifo = tarfile.TarInfo("./pipe")
    fifo.type = tarfile.FIFOTYPE
    data = tar_gz({**profile_members(7, ["a"]), "./pipe": fifo})
    with pytest.raises(BadBundle, match="shard 1: member 'pipe' is not a regular file or folder"):
        merge_bundles([ShardBundle("1", (7,), lambda: io.BytesIO(data))], io.BytesIO())
