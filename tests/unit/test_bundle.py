import gzip
import io
import tarfile

import pytest

from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.errors import BadBundle
from codspeed_local.profiles import callgrind_text
from codspeed_rules.bundle import MAX_PROCESSES, MAX_RESULTS, BundleLimits
from codspeed_rules.tar import member_path
from tests.factories import bundle, profile_members, tar_gz


def _validate(data: bytes, keep=MAX_RESULTS, **limits):
    return validate_bundle(io.BytesIO(data), limits=BundleLimits(**limits), keep=keep)


def _special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def test_a_good_bundle_is_summarized():
    summary = _validate(bundle(4242, ["a::one", "a::two"]))
    assert summary.pids == [4242]
    assert summary.benchmarks == 2
    assert summary.benchmark_names == ["a::one", "a::two"]
    assert summary.members == 5


def test_a_bundle_validated_for_a_merge_that_reports_no_benchmark_is_read_alike_but_for_its_benchmarks():
    data = tar_gz({**profile_members(10, ["a"]), **profile_members(11, ["b", "c"])})
    full, merge_only = _validate(data), _validate(data, keep=None)
    assert (merge_only.pids, merge_only.members, merge_only.listing) == (full.pids, full.members, full.listing)
    assert (merge_only.benchmarks, merge_only.benchmark_names, merge_only.results) == (0, [], {})
    assert full.benchmarks == 3


def test_several_out_files_in_one_shard_are_all_counted():
    members = {**profile_members(10, ["a"]), **profile_members(11, ["b", "c"])}
    summary = _validate(tar_gz(members))
    assert sorted(summary.pids) == [10, 11]
    assert summary.benchmarks == 3


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"this is not gzip at all", "neither gzip-compressed nor a tar archive"),
        (gzip.compress(b"plain text, not a tar archive" * 40), "gzip but not a tar archive"),
        (bundle()[:-40], "truncated or corrupt"),
        (b"", "empty file"),
        (tar_gz({}), "empty archive"),
        (tar_gz({"./../escape.out": b"x"}), "points outside the profile folder"),
        (tar_gz({"/etc/passwd": b"x"}), "absolute path"),
        (
            tar_gz(
                {
                    "./1.out": callgrind_text(1, ["a"]).encode(),
                    "./link": _special("./link", tarfile.SYMTYPE, "/etc/passwd"),
                }
            ),
            "is a symlink",
        ),
        (
            tar_gz(
                {"./1.out": callgrind_text(1, ["a"]).encode(), "./hard": _special("./hard", tarfile.LNKTYPE, "../x")}
            ),
            "is a hard link",
        ),
        (
            tar_gz({"./1.out": callgrind_text(1, ["a"]).encode(), "./dev": _special("./dev", tarfile.CHRTYPE)}),
            "device or special file",
        ),
        (tar_gz({"./inner.tar.gz": b"x", "./1.out": callgrind_text(1, ["a"]).encode()}), "archive inside the archive"),
        (tar_gz({"./runner.log": b"only a log"}), "no <pid>.out callgrind file"),
        (tar_gz({"./12.out": b"# callgrind format\nversion: 1\ncmd: x\n"}), "has no 'pid:' header line"),
        (tar_gz({"./12.out": callgrind_text(13, ["a"]).encode()}), "declares 'pid: 13'"),
        (tar_gz({"./12.out": b"hello\npid: 12\n"}), "is not a callgrind file"),
        (tar_gz({"./a\x01b.out": b"x"}), "control character"),
    ],
)
@pytest.mark.parametrize("keep", [MAX_RESULTS, None], ids=["benchmarks read", "no benchmark looked for"])
def test_bad_bundles_are_refused_with_a_reason(data, reason, keep):
    with pytest.raises(BadBundle, match=reason):
        _validate(data, keep=keep)


def test_a_gzip_bomb_is_refused_by_its_ratio():
    zeros = b"\0" * (8 << 20)
    data = tar_gz({"./1.out": callgrind_text(1, ["a"]).encode(), "./zeros.bin": zeros})
    with pytest.raises(BadBundle, match="gzip bomb"):
        _validate(data, ratio_floor_bytes=1 << 20, max_ratio=50)
    assert _validate(data).pids == [1]  # the default limits let an honest 8 MiB file through


def test_limits_on_members_and_unpacked_size():
    data = bundle()
    with pytest.raises(BadBundle, match="more than 2 members"):
        _validate(data, max_members=2)
    with pytest.raises(BadBundle, match="unpacks to more than 100 bytes"):
        _validate(data, max_unpacked_bytes=100)


def test_member_paths_are_normalized():
    assert member_path("./results/1.json") == "results/1.json"
    assert member_path("1.out") == "1.out"
    for bad in ("a/../../b", "/abs", "a\\b", ""):
        with pytest.raises(BadBundle):
            member_path(bad)


def test_every_executors_folder_is_valid_plain_or_gzip():
    from tests import runner

    walltime = validate_bundle(io.BytesIO(runner.recorded_walltime()), "walltime")
    assert walltime.gzipped is False and walltime.members == 5
    assert walltime.pids == [13690]  # its results/<pid>.json: renumbered where a build's walltime shards merge
    # its benchmarks are pytest-codspeed's results: counted and named, as a valgrind shard's callgrind parts are
    assert walltime.benchmarks == 3 and [n.rsplit("::", 1)[1] for n in walltime.benchmark_names] == [
        "test_fib_10",
        "test_sum",
        "test_sorted",
    ]
    valgrind = validate_bundle(io.BytesIO(runner.recorded(1)))  # its results/<pid>.json does not count again
    assert valgrind.benchmarks == 1 and len(valgrind.benchmark_names) == 1
    made = runner.folder_archive(runner.walltime_folder(77, "t"), gzipped=True)
    assert validate_bundle(io.BytesIO(made), "walltime").gzipped is True
    memory = runner.folder_archive(runner.memory_folder(77), gzipped=False)
    assert validate_bundle(io.BytesIO(memory), "memory").members == 4
    with pytest.raises(BadBundle, match="no <pid>.out callgrind file"):
        validate_bundle(io.BytesIO(memory), "valgrind")  # a valgrind upload must hold a profile
    trace = runner.folder_archive({"31.tgtrace": b"\x00trace", "runner.log": b"log\n"}, gzipped=True)
    assert validate_bundle(io.BytesIO(trace)).pids == [31]  # Tracegrind's <pid>.tgtrace moves with its pid too


def test_a_plain_tar_is_checked_as_strictly_as_a_gzip_one():
    from tests import runner

    plain = runner.folder_archive({"1.out": callgrind_text(2, ["a"]).encode()}, gzipped=False)
    with pytest.raises(BadBundle, match="declares 'pid: 2'"):
        validate_bundle(io.BytesIO(plain))
    with pytest.raises(BadBundle, match="neither gzip-compressed nor a tar archive"):
        validate_bundle(io.BytesIO(b"x" * 1024), "walltime")


def test_a_pid_line_cut_by_the_64_kib_head_is_refused_not_read_as_another_pid():
    from codspeed_rules.callgrind import HEADER_BYTES

    head = b"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\ncmd: python\n"
    filler = b"# " + b"x" * (HEADER_BYTES - len(head) - 2 - 1 - len(b"pid: 42")) + b"\n"
    content = head + filler + b"pid: 4242\n" + b"fl=a.py\n"  # the head ends inside the line: 'pid: 42'
    assert len(head + filler) + len(b"pid: 42") == HEADER_BYTES
    # named 42.out, it would pass as pid 42, and its real 'pid: 4242' line would never be renumbered
    with pytest.raises(
        BadBundle, match=r"42.out's 'pid:' line runs past its first 64 KiB: its pid cannot be read whole"
    ):
        validate_bundle(io.BytesIO(tar_gz({"./42.out": content})))
    whole = head + b"pid: 42\n" + filler  # a pid line within the head: read
    assert validate_bundle(io.BytesIO(tar_gz({"./42.out": whole}))).pids == [42]


class _Unseekable:
    """A stream as S3 or a gzip reader gives it: no seek, and reads shorter than asked."""

    def __init__(self, data: bytes = b"", most: int = 700) -> None:
        self._data, self._at, self._most, self.written = data, 0, most, bytearray()

    def read(self, n: int = -1) -> bytes:
        n = self._most if n < 0 else min(n, self._most)
        piece = self._data[self._at : self._at + n]
        self._at += len(piece)
        return piece

    def write(self, data: bytes) -> int:
        self.written += data
        return len(data)


def test_a_tar_read_and_written_front_to_back_as_a_file_is_what_tarfile_s_stream_modes_read_and_write():
    """Validation and the merge open tars as files through ForwardOnly (tarfile's stream modes copy
    every byte three times): the same bytes written, the same members read, from a stream that
    reads short and cannot seek."""
    from codspeed_rules.tar import ForwardOnly

    members = profile_members(4242, ["t::a", "t::b"])
    members["./runner.log"] = bytes(range(256)) * 3000
    streamed, as_file = io.BytesIO(), _Unseekable()

    def info(name: str, data: bytes) -> tarfile.TarInfo:
        made = tarfile.TarInfo(name)
        made.size, made.mtime = len(data), 7
        return made

    with tarfile.open(fileobj=streamed, mode="w|", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            tar.addfile(info(name, data), io.BytesIO(data))
    with tarfile.open(fileobj=ForwardOnly(as_file), mode="w:", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members.items():
            tar.addfile(info(name, data), io.BytesIO(data))
    assert bytes(as_file.written) == streamed.getvalue()
    read = {}
    with tarfile.open(fileobj=ForwardOnly(_Unseekable(streamed.getvalue())), mode="r:") as tar:
        for member in tar:
            read[member.name] = tar.extractfile(member).read()
    assert read == members
    with tarfile.open(fileobj=ForwardOnly(_Unseekable(streamed.getvalue())), mode="r:") as tar:
        assert [m.name for m in tar] == list(members)  # contents not read: each skipped by reading on
    stream = ForwardOnly(_Unseekable(streamed.getvalue()))
    stream.read(1000)
    with pytest.raises(tarfile.StreamError, match="seeking backwards is not allowed"):
        stream.seek(10)
    assert stream.tell() == 1000 and stream.seek(5000) == 5000


def test_a_bundle_of_more_processes_than_a_shard_record_lists_is_refused_naming_the_limit():
    """Their pids are one attribute of the shard's item: 10,000 of them are about 70 KB of its 400 KB."""
    members = {f"./{pid}.out": callgrind_text(pid, [], 0).encode() for pid in range(1, MAX_PROCESSES + 2)}
    with pytest.raises(
        BadBundle, match=f"^10001.out: a bundle holds the profiles of {MAX_PROCESSES} processes at most$"
    ):
        _validate(tar_gz(members))
    del members[f"./{MAX_PROCESSES + 1}.out"]
    assert len(_validate(tar_gz(members)).pids) == MAX_PROCESSES
