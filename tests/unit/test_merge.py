import base64
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import tarfile

import pytest

from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles
from tests.factories import bundle, profile_members, tar_gz


def _shard(name: str, data: bytes) -> ShardBundle:
    pids = tuple(validate_bundle(io.BytesIO(data)).pids)
    return ShardBundle(name, pids, lambda: io.BytesIO(data))


def _merge(shards, **kwargs) -> tuple[bytes, object]:
    out = io.BytesIO()
    result = merge_bundles(shards, out, **kwargs)
    return out.getvalue(), result


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_colliding_pids_move_with_their_files_and_pid_lines():
    shards = [_shard(str(i), bundle(4242, [f"t{i}::b{j}" for j in range(3)])) for i in (1, 2, 3)]
    archive, result = _merge(shards)
    members = _members(archive)
    outs = sorted(n for n in members if n.endswith(".out"))
    assert outs == ["./4242.out", "./4243.out", "./4244.out"]
    for name in outs:
        pid = re.search(r"(\d+)\.out", name)[1]
        assert re.findall(rb"^pid: (\d+)$", members[name], re.M) == [pid.encode()]
        assert f"./perf-{pid}.map" in members and f"./results/{pid}.json" in members
    assert result.renumbered == {"2": {4242: 4243}, "3": {4242: 4244}}
    benchmarks = b"".join(members[n] for n in outs).count(b"Trigger: Client Request: t")
    assert benchmarks == 9


def test_every_shards_logs_are_kept_renamed_when_they_collide():
    shards = [_shard(str(i), bundle(4242 + i)) for i in (1, 2)]
    kept = [n for n in _members(_merge(shards)[0]) if n.endswith(".log")]
    assert sorted(kept) == ["./runner.log", "./runner.shard-2.log", "./valgrind.4243.log", "./valgrind.4244.log"]


def test_no_two_members_share_a_name():
    shards = [_shard(str(i), tar_gz({**profile_members(7, ["x"]), "./notes.txt": b"same name"})) for i in (1, 2, 3)]
    archive, _ = _merge(shards)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = tar.getnames()
    assert len(names) == len(set(names))
    assert {"./notes.txt", "./notes.shard-2.txt", "./notes.shard-3.txt"} <= set(names)


def test_several_out_files_in_one_shard_are_renumbered_independently():
    one = tar_gz({**profile_members(10, ["a"]), **profile_members(11, ["b"])})
    two = tar_gz({**profile_members(10, ["c"]), **profile_members(11, ["d"])})
    members = _members(_merge([_shard("1", one), _shard("2", two)])[0])
    assert sorted(n for n in members if n.endswith(".out")) == ["./10.out", "./11.out", "./12.out", "./13.out"]


def test_a_widened_pid_is_spooled_and_its_size_is_right():
    shards = [_shard(str(i), bundle(5, ["x"])) for i in range(11)]
    members = _members(_merge(shards)[0])
    assert b"\npid: 10\n" in members["./10.out"]


def test_merged_archive_is_one_gzip_member_whose_md5_is_reported_and_stable():
    shards = [_shard(str(i), bundle(4242)) for i in (1, 2)]
    archive, result = _merge(shards)
    assert result.md5 == base64.b64encode(hashlib.md5(archive).digest()).decode()
    assert result.size == len(archive)
    assert archive[:2] == b"\x1f\x8b" and archive.count(b"\x1f\x8b\x08") >= 1
    decompressor = __import__("zlib").decompressobj(31)
    decompressor.decompress(archive)
    assert decompressor.eof and decompressor.unused_data == b""  # a single gzip member
    assert _merge(shards)[0] == archive  # deterministic: a retried forward sends the same bytes
    assert gzip.decompress(archive)


@pytest.mark.skipif(not shutil.which("tar"), reason="GNU tar not installed")
def test_gnu_tar_reads_the_merged_archive(tmp_path):
    archive, _ = _merge([_shard(str(i), bundle(4242)) for i in (1, 2)])
    (tmp_path / "merged.tar.gz").write_bytes(archive)
    listing = subprocess.run(
        ["tar", "-tzf", str(tmp_path / "merged.tar.gz")], capture_output=True, text=True, check=True
    )
    assert "./4243.out" in listing.stdout.split()


def test_uploads_are_planned_under_the_benchmark_limit_in_shard_order():
    from codspeed_aggregator.domain.upstream_parts import plan_uploads

    assert plan_uploads([("a", 400, 1), ("b", 400, 1), ("c", 400, 1)], 1000) == [["a", "b"], ["c"]]
    assert plan_uploads([("a", 1000, 1), ("b", 1, 1)], 1000) == [["a"], ["b"]]
    assert plan_uploads([("huge", 1500, 1), ("b", 10, 1)], 1000) == [["huge"], ["b"]]  # a shard is never split
    assert plan_uploads([("a", 3, 1), ("b", 4, 1)], 1000) == [["a", "b"]]


def test_uploads_are_bounded_by_bytes_too():
    from codspeed_aggregator.domain.upstream_parts import MAX_UPLOAD_BYTES, plan_uploads

    gib = 1 << 30
    shards = [(f"s{i}", 10, gib // 5) for i in range(200)]  # 200 shards x 200 MiB: a 40 GB run
    groups = plan_uploads(shards, 1000)
    assert sum(len(g) for g in groups) == 200 and len(groups) == 10
    assert all(sum(gib // 5 for _ in g) <= MAX_UPLOAD_BYTES < 5 * 10**9 for g in groups)
    assert plan_uploads([("big", 1, 6 * gib), ("b", 1, 1)], 1000) == [["big"], ["b"]]


def test_real_pytest_codspeed_folders_merge_with_each_pid_its_results_and_its_logs():
    from tests import runner

    shards = [_shard(str(i), runner.recorded(i)) for i in (1, 2, 3)]  # all three are pid 2
    archive, result = _merge(shards)
    members = _members(archive)
    assert result.renumbered == {"2": {2: 3}, "3": {2: 4}}
    for pid in (2, 3, 4):
        assert re.findall(rb"^pid: (\d+)$", members[f"./{pid}.out"], re.M) == [str(pid).encode()]
        results = __import__("json").loads(members[f"./results/{pid}.json"])
        assert results["creator"] == {"name": "pytest-codspeed", "version": "5.0.4", "pid": pid}
        assert f"./environment-{pid}.json" in members and f"./valgrind.{pid}.log" in members
    assert sorted(n for n in members if n.startswith("./runner")) == [
        "./runner.log",
        "./runner.shard-2.log",
        "./runner.shard-3.log",
    ]
    assert sorted(n for n in members if n.endswith("gitignore")) == [
        "./results/.gitignore",
        "./results/.shard-2.gitignore",
        "./results/.shard-3.gitignore",
    ]
    assert len(members) == 3 * 6  # nothing any shard had is left out


def test_only_the_pid_in_a_name_moves_never_other_digits():
    from codspeed_aggregator.domain.merge import renamed

    moves = {4242: 4243, 7: 8, 0: 1}
    assert renamed("4242_7_7_0.unwind_data", moves) == "4243_7_7_0.unwind_data"
    assert renamed("perf-4242.map", moves) == "perf-4243.map"
    assert renamed("valgrind.4242.log", moves) == "valgrind.4243.log"
    assert renamed("results/4242.MemtrackArtifact.msgpack", moves) == "results/4243.MemtrackArtifact.msgpack"
    assert renamed("jit-7.dump", moves) == "jit-8.dump"
    assert renamed("results/ExecutionTimestamps.msgpack", moves) == "results/ExecutionTimestamps.msgpack"
    assert renamed("data_2024_7.csv", moves) == "data_2024_7.csv"


def test_a_renamed_member_never_takes_a_name_another_shard_already_used():
    first = tar_gz({**profile_members(7, ["x"]), "./notes.txt": b"one", "./notes.shard-2.txt": b"one's own"})
    second = tar_gz({**profile_members(8, ["y"]), "./notes.txt": b"two"})
    members = _members(_merge([_shard("1", first), _shard("2", second)])[0])
    assert members["./notes.shard-2.txt"] == b"one's own" and members["./notes.shard-2-2.txt"] == b"two"


class _CountingOpens:
    """A shard's opener that counts how often, and how many bytes, the merge read it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.opens, self.read = data, 0, 0

    def __call__(self):
        self.opens += 1
        outer, stream = self, io.BytesIO(self.data)

        class Counted(io.RawIOBase):
            def read(self, n=-1):
                chunk = stream.read(n)
                outer.read += len(chunk)
                return chunk

        return Counted()


def _unchecked(name: str, data: bytes) -> tuple[ShardBundle, "_CountingOpens"]:
    opener = _CountingOpens(data)
    return ShardBundle(name, None, opener), opener


def test_bundles_not_validated_before_are_checked_and_read_once_while_merging():
    datas = {
        "1": bundle(5, ["a::x"]),
        "2": tar_gz({**profile_members(5, ["b::x"]), **profile_members(6, ["b::y"])}),
        "3": bundle(6, ["c::x"]),
    }
    pairs = {name: _unchecked(name, data) for name, data in datas.items()}
    archive, result = _merge([shard for shard, _ in pairs.values()])
    assert {name: (o.opens, o.read) for name, (_, o) in pairs.items()} == {n: (1, len(d)) for n, d in datas.items()}
    members = _members(archive)
    outs = sorted(n for n in members if n.endswith(".out"))
    assert len(outs) == 4 and len(set(outs)) == 4
    for name in outs:  # every file and pid line agree, whichever pids moved
        pid = re.search(r"(\d+)\.out", name)[1]
        assert re.findall(rb"^pid: (\d+)$", members[name], re.M) == [pid.encode()]
        assert f"./results/{pid}.json" in members and f"./perf-{pid}.map" in members
    # planned as they stream: 2's 5 took 6 before 2's own 6 came, which then moved on to 7
    assert result.renumbered == {"2": {5: 6, 6: 7}, "3": {6: 8}}
    planned, _ = _merge([_shard(n, d) for n, d in datas.items()])
    assert sorted(_members(planned)) != [] and len(_members(planned)) == len(members)


@pytest.mark.parametrize(
    "bad, reason",
    [
        (tar_gz({"./9.out": b"# callgrind format\nversion: 1\npid: 8\n"}), "9.out declares 'pid: 8'"),
        (b"\x1f\x8b" + b"\x00" * 20, "gzip"),
        (tar_gz({"./notes.txt": b"no profile"}), "holds no <pid>.out"),
    ],
)
def test_a_bundle_checked_while_merging_stops_the_merge_with_its_name_and_reason(bad, reason):
    from codspeed_aggregator.domain.merge import ShardRefused

    shards = [_unchecked("1", bundle(5, ["a::x"]))[0], _unchecked("2", bad)[0]]
    with pytest.raises(ShardRefused, match=re.escape(reason)) as refused:
        _merge(shards)
    assert refused.value.shard == "2"


def test_a_merge_is_the_same_bytes_on_one_compressing_thread_as_on_two(monkeypatch):
    """Where it has two cores the merge compresses on two threads: a retry on a smaller machine,
    or the offline command beside the finalizer, still writes the very same archive."""
    import random

    from codspeed_aggregator.domain import gz

    members = profile_members(4242, ["t::a", "t::b"])
    members["./runner.log"] = random.Random(5).randbytes(3 << 20) + b"x" * (2 << 20)  # several 1 MiB blocks
    shards = [_shard("1", tar_gz(members)), _shard("2", bundle(4242, ["t::c"]))]
    written, opened = {}, gz.igzip_threaded.open
    for cores in (1, 2):
        monkeypatch.setattr(gz, "usable_cores", lambda cores=cores: cores)
        threads = []
        monkeypatch.setattr(
            gz.igzip_threaded, "open", lambda *a, seen=threads, **k: seen.append(k["threads"]) or opened(*a, **k)
        )
        written[cores] = _merge(shards)[0]
        assert threads == [cores]
    assert written[1] == written[2] and _members(written[2])["./runner.log"] == members["./runner.log"]
