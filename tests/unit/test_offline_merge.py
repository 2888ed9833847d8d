import tarfile

from codspeed_aggregator.cli import main
from tests.factories import bundle


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
    assert capsys.readouterr().err.strip() == f"codspeed-aggregator: {bad} refused: the bundle is neither gzip-compressed nor a tar archive"
    assert not out.exists()
    assert main(["merge", str(tmp_path / "absent.tar.gz"), "-o", str(out)]) == 7
