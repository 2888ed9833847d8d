import gzip
import tarfile
from pathlib import Path

import pytest

from codspeed_aggregator.cli import main
from tests.factories import bundle, marked_uncut, packed, tar_gz


def test_merge_command_merges_bundles_with_colliding_pids(tmp_path, capsys):
    paths = []
    for i in (1, 2):
        path = tmp_path / f"shard{i}.tar.gz"
        path.write_bytes(bundle(4242, [f"t{i}::b"]))
        paths.append(str(path))
    out = tmp_path / "merged.tar.gz"
    assert main(["merge", *paths, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "merged 2 bundles" in printed and "1 pids renumbered" in printed
    with tarfile.open(out) as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".out")) == ["./4242.out", "./4243.out"]


def test_merge_command_refuses_a_bad_bundle_by_name_and_writes_nothing(tmp_path, capsys):
    good, bad = tmp_path / "good.tar.gz", tmp_path / "bad.tar.gz"
    good.write_bytes(bundle())
    bad.write_bytes(b"not gzip")
    out = tmp_path / "merged.tar.gz"
    assert main(["merge", str(good), str(bad), "-o", str(out)]) == 7
    assert (
        capsys.readouterr().err.strip()
        == f"codspeed-aggregator: {bad} refused: the bundle is neither gzip-compressed nor a tar archive"
    )
    assert not out.exists()
    assert main(["merge", str(tmp_path / "absent.tar.gz"), "-o", str(out)]) == 7


def _write(tmp_path, datas: list[bytes]) -> list[str]:
    paths = []
    for i, data in enumerate(datas, start=1):
        path = tmp_path / f"shard{i}.tar.gz"
        path.write_bytes(data)
        paths.append(str(path))
    return paths


def _outs(path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _merged_by_the_finalizer(datas: list[bytes], out: Path) -> None:
    import io

    from codspeed_aggregator.domain.bundle import validate_bundle
    from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles

    shards = [
        ShardBundle(str(i), tuple(validate_bundle(io.BytesIO(d)).pids), lambda d=d: io.BytesIO(d))
        for i, d in enumerate(datas, start=1)
    ]
    with open(out, "wb") as f:
        merge_bundles(shards, f)


@pytest.mark.parametrize("cores, how", [(4, "spliced"), (2, "recompressed")])
def test_packed_runner_and_wrongly_marked_bundles_merge_into_what_the_finalizer_writes(
    tmp_path, capsys, monkeypatch, cores, how
):
    """With enough cores each is made ready to splice (verified, or normalized into a copy); on
    fewer, a runner's bundle makes the merge recompress all of them in one read."""
    from codspeed_aggregator import offline

    monkeypatch.setattr(offline, "usable_cores", lambda: cores)
    runner = [bundle(4242, [f"t{i}::b"]) for i in (1, 2, 3)]
    _merged_by_the_finalizer(runner, tmp_path / "expected.tar.gz")
    # packed by the client (verified), as the runner makes them (normalized), marked but not cut (normalized)
    datas = [packed(runner[0]), runner[1], marked_uncut(runner[2])]
    assert main(["merge", *_write(tmp_path, datas), "-o", str(tmp_path / "merged.tar.gz")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("merged 3 bundles") and f"({how})" in printed and "2 pids renumbered" in printed
    assert _outs(tmp_path / "merged.tar.gz") == _outs(tmp_path / "expected.tar.gz")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "expected.tar.gz",
        "merged.tar.gz",
        "shard1.tar.gz",
        "shard2.tar.gz",
        "shard3.tar.gz",
    ]  # no scratch left


def test_on_two_cores_a_runner_bundle_is_not_normalized_before_the_merge_recompresses_it(tmp_path, capsys, monkeypatch):
    from codspeed_aggregator import offline

    monkeypatch.setattr(offline, "usable_cores", lambda: 2)
    monkeypatch.setattr(offline, "_prepared", lambda *_: pytest.fail("normalized first"))
    paths = _write(tmp_path, [packed(bundle(4242, ["t1::b"])), bundle(4242, ["t2::b"])])
    assert main(["merge", *paths, "-o", str(tmp_path / "merged.tar.gz")]) == 0
    assert "(recompressed)" in capsys.readouterr().out
    assert sorted(n for n in _outs(tmp_path / "merged.tar.gz") if n.endswith(".out")) == ["./4242.out", "./4243.out"]


def test_bundles_the_client_packed_are_spliced_on_any_number_of_cores(tmp_path, capsys, monkeypatch):
    from codspeed_aggregator import offline

    monkeypatch.setattr(offline, "usable_cores", lambda: 1)
    paths = _write(tmp_path, [packed(bundle(4242, [f"t{i}::b"])) for i in (1, 2)])
    assert main(["merge", *paths, "-o", str(tmp_path / "merged.tar.gz")]) == 0
    assert "(spliced)" in capsys.readouterr().out


def test_a_bundle_that_cannot_be_indexed_recompresses_them_all_as_validation_read_them(tmp_path, capsys):
    from tests.unit.test_normalize import _pax_overridden

    datas = [packed(bundle(4242, ["t1::b"])), gzip.compress(_pax_overridden("size", "3"))]
    assert main(["merge", *_write(tmp_path, datas), "-o", str(tmp_path / "merged.tar.gz")]) == 0
    assert "(recompressed)" in capsys.readouterr().out
    outs = _outs(tmp_path / "merged.tar.gz")
    assert sorted(n for n in outs if n.endswith(".out")) == ["./4242.out", "./4243.out"]
    assert outs["./runner.log"] == b"runner log\n" and outs["./runner.shard-2.log"] == b"run"


def test_a_packed_bundle_that_fails_a_check_is_refused_by_name_and_nothing_is_written(tmp_path, capsys):
    bad = packed(tar_gz({"./4242.out": b"not callgrind\n", "./runner.log": b"log\n"}))
    paths = _write(tmp_path, [packed(bundle()), bad])
    out = tmp_path / "merged.tar.gz"
    assert main(["merge", *paths, "-o", str(out)]) == 7
    assert capsys.readouterr().err.strip() == (
        f"codspeed-aggregator: {paths[1]} refused: 4242.out is not a callgrind file "
        "(no '# callgrind format' or 'version:' first line)"
    )
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["shard1.tar.gz", "shard2.tar.gz"]


def test_a_bundle_changed_after_it_was_read_is_merged_as_it_is_now(tmp_path, capsys, monkeypatch):
    from codspeed_aggregator import offline

    paths = _write(tmp_path, [packed(bundle(4242, [f"t{i}::b"])) for i in (1, 2)])
    prepared = offline._prepared

    def then_changed(names, scratch):  # the second bundle changes once it was verified, before it is spliced
        for shard in prepared(names, scratch):
            if shard.name == "2":
                Path(names[1]).write_bytes(packed(bundle(4242, ["t9::z"])))
            yield shard

    monkeypatch.setattr(offline, "_prepared", then_changed)
    assert main(["merge", *paths, "-o", str(tmp_path / "merged.tar.gz")]) == 0
    assert "(recompressed)" in capsys.readouterr().out
    assert b"t9::z" in _outs(tmp_path / "merged.tar.gz")["./4243.out"]


def test_the_merge_command_needs_no_aws_setting(tmp_path):
    import os
    import subprocess
    import sys

    paths = _write(tmp_path, [bundle(4242, ["t1::b"]), bundle(4242, ["t2::b"])])
    bare = {
        k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLE_", "BUCKET_", "FINALIZE_", "UPSTREAM_"))
    }
    out = tmp_path / "merged.tar.gz"
    done = subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "merge", *paths, "-o", str(out)],
        env=bare,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "merged 2 bundles" in done.stdout, done.stderr
    with tarfile.open(out) as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".out")) == ["./4242.out", "./4243.out"]


def test_each_packed_bundle_is_spliced_as_soon_as_it_is_verified(tmp_path, capsys, monkeypatch):
    """The splice does not wait for every bundle to be verified: it copies one while the next is
    verified (here on one core, in turn), so verifying and copying overlap on two."""
    from codspeed_aggregator import offline

    monkeypatch.setattr(offline, "usable_cores", lambda: 1)
    events, prepare, made = [], offline._prepare, offline.NormalizedShard

    def verified(job):
        events.append(("verified", Path(job[0]).name))
        return prepare(job)

    def shard(name, pids, index, opener):
        def opened():
            events.append(("spliced", f"shard{name}.tar.gz"))
            return opener()

        return made(name, pids, index, opened)

    monkeypatch.setattr(offline, "_prepare", verified)
    monkeypatch.setattr(offline, "NormalizedShard", shard)
    paths = _write(tmp_path, [packed(bundle(4242, [f"t{i}::b"])) for i in (1, 2, 3)])
    assert main(["merge", *paths, "-o", str(tmp_path / "merged.tar.gz")]) == 0
    assert "(spliced)" in capsys.readouterr().out
    assert events == [(kind, f"shard{i}.tar.gz") for i in (1, 2, 3) for kind in ("verified", "spliced")]


def test_a_verifying_worker_keeps_the_memory_it_frees():
    """A worker inflates a MiB at a time, a few MiB held at once: by default glibc hands the
    freed top of its heap back to the system every time and faults it in again at the next."""
    import subprocess
    import sys

    code = (
        "import resource, sys\n"
        "from codspeed_aggregator.offline import keep_freed_memory\n"
        "if sys.argv[1] == 'kept':\n"
        "    keep_freed_memory()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(50):\n"
        "    held = [b'x' * (1 << 20) for _ in range(4)]\n"
        "    del held\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    faults = {
        how: int(subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, check=True).stdout)
        for how in ("plain", "kept")
    }
    assert faults["plain"] > 20 * 1024 and faults["kept"] < faults["plain"] / 10, faults
