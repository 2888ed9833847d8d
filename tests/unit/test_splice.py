"""Normalized bundles and the splice: the same archive as today's merge, without recompressing."""

import gzip
import io
import random
import subprocess
import tarfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain import gz
from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles
from codspeed_aggregator.domain.splice import IndexMismatch, NormalizedShard, splice
from codspeed_rules.index import Index, IndexUnreadable
from codspeed_rules.normalize import Normalizer
from tests.factories import bundle, profile_members, tar_gz

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pytest_codspeed"


def normalized(data: bytes, prove: bool = False) -> tuple[bytes, Index]:
    """What an arrival makes of a bundle: its tar, read once, cut into segments (``prove``: and each
    segment inflated alone as it is written, as arrivals do; without, the splice checks them all)."""
    out = io.BytesIO()
    normalizer = Normalizer(out, compressor=gz.raw_compressor, prove=gz.raw_inflater if prove else None)
    summary = validate_bundle(io.BytesIO(data), tap=normalizer.feed)
    index = normalizer.close()
    assert summary.members > 0 and index is not None
    return out.getvalue(), index


def _both(datas: list[bytes], prove: bool = False) -> tuple[bytes, object, bytes, object]:
    shards, spliced = [], []
    for i, data in enumerate(datas):
        pids = tuple(validate_bundle(io.BytesIO(data)).pids)
        shards.append(ShardBundle(str(i), pids, lambda d=data: io.BytesIO(d)))
        copy, index = normalized(data, prove)
        spliced.append(NormalizedShard(str(i), pids, index, lambda c=copy: io.BytesIO(c)))
    merged, spliced_out = io.BytesIO(), io.BytesIO()
    merge_result = merge_bundles(shards, merged)
    splice_result = splice(spliced, spliced_out)
    return merged.getvalue(), merge_result, spliced_out.getvalue(), splice_result


def _members(archive: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {
            m.name: (m.type, m.mode, m.size, tar.extractfile(m).read() if m.isfile() else None)
            for m in tar.getmembers()
        }


def _first_member_only(archive: bytes) -> bytes:
    """A reader that takes the first gzip member and nothing after it."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = inflate.decompress(archive)
    assert inflate.eof and inflate.unused_data == b""  # one member, and nothing after it
    return data


@pytest.mark.parametrize("prove", [False, True], ids=["checked at the splice", "inflated alone at arrival"])
def test_real_pytest_codspeed_shards_splice_to_the_merge_s_members_and_any_reader_accepts_it(tmp_path, prove):
    datas = [(FIXTURES / f"valgrind-shard-{i}.tar.gz").read_bytes() for i in (1, 2, 3)]
    merged, merge_result, spliced, splice_result = _both(datas, prove)
    assert _members(spliced) == _members(merged)
    assert splice_result.members == merge_result.members and splice_result.renumbered == merge_result.renumbered
    assert gzip.decompress(spliced) == _first_member_only(spliced)
    path = tmp_path / "spliced.tar.gz"
    path.write_bytes(spliced)
    assert subprocess.run(["gzip", "-t", str(path)]).returncode == 0
    listed = subprocess.run(["tar", "-tzf", str(path)], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(name.rstrip("/") for name in listed) == sorted(_members(merged))
    assert splice_result.size == len(spliced)
    for archive in (merged, spliced):  # each opens with the "." folder, as the runner's own archives do
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            first = tar.next()
            assert (first.name, first.isdir()) == (".", True)


def test_colliding_pids_of_the_same_width_rewrite_only_the_head_and_wider_ones_the_whole_file():
    same = [bundle(4242, [f"t{i}::a", f"t{i}::b"]) for i in range(3)]  # 4242 -> 4243, 4244: heads re-encoded
    merged, _, spliced, result = _both(same)
    assert _members(spliced) == _members(merged) and result.renumbered == {"1": {4242: 4243}, "2": {4242: 4244}}
    wider = [bundle(5, [f"t{i}::a"]) for i in range(11)]  # the eleventh 5 finds no free one-digit pid: 10
    merged, _, spliced, result = _both(wider)
    assert _members(spliced) == _members(merged) and result.renumbered["10"] == {5: 10}
    assert b"pid: 10\n" in _members(spliced)["./10.out"][3]


def test_a_runner_gzip_and_a_plain_tar_normalize_alike():
    runner = (FIXTURES / "valgrind-shard-1.tar.gz").read_bytes()
    plain = gzip.decompress(runner)
    copy_of_gzip, index_gzip = normalized(runner)
    copy_of_plain, index_plain = normalized(plain)
    assert copy_of_gzip == copy_of_plain and index_gzip == index_plain
    assert gzip.decompress(copy_of_gzip) == plain
    for member in index_gzip.members:  # every segment stands alone: a full flush ends each
        for kind, offset, length, unpacked, crc in member.segments:
            data = zlib.decompressobj(-15).decompress(copy_of_gzip[offset : offset + length])
            assert (len(data), zlib.crc32(data)) == (unpacked, crc), (member.name, kind)
    out = next(m for m in index_gzip.members if m.name.endswith(".out"))
    assert [s.kind for s in out.segments] == ["header", "head", "body", "pad"] and out.pid_lines == 1


def _spliced_with(copy: bytes, index: Index):
    shard = NormalizedShard("1", (2,), index, lambda: io.BytesIO(copy))
    return splice([shard], io.BytesIO())


def test_an_index_that_does_not_match_its_object_is_refused_never_followed():
    copy, index = normalized((FIXTURES / "valgrind-shard-1.tar.gz").read_bytes())
    altered = bytearray(copy)
    altered[len(copy) // 2] ^= 0xFF
    with pytest.raises(IndexMismatch, match="is not the one indexed"):
        _spliced_with(bytes(altered), index)
    other_copy, other_index = normalized((FIXTURES / "valgrind-shard-2.tar.gz").read_bytes())
    with pytest.raises(IndexMismatch):
        _spliced_with(copy, other_index)
    overlapping = replace(index, members=[*index.members, index.members[1]])
    with pytest.raises(IndexMismatch, match="overlaps"):
        _spliced_with(copy, overlapping)
    with pytest.raises(IndexUnreadable, match="index format 99 is not 1"):
        Index.from_json({**index.to_json(), "format": 99})
    assert _spliced_with(copy, index).size > 0  # the untouched pair splices


def test_a_tar_the_normalizer_cannot_cut_gives_no_index_and_validation_says_why():
    out = io.BytesIO()
    normalizer = Normalizer(out)
    normalizer.feed(b"this is not a tar header" * 30)
    assert normalizer.close() is None


names = st.lists(st.sampled_from(["a", "b", "c::d", "e f"]), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([7, 7, 42, 99, 1234]), names, st.booleans()), min_size=1, max_size=5))
def test_splicing_normalized_bundles_extracts_to_what_the_merge_writes(shards):
    datas = []
    for index, (pid, benchmarks, with_log) in enumerate(shards):
        members = profile_members(pid, [f"{b}{index}" for b in benchmarks])
        if not with_log:
            del members["./runner.log"]
        datas.append(tar_gz(members))
    merged, merge_result, spliced, splice_result = _both(datas)
    assert _members(spliced) == _members(merged)
    assert splice_result.renumbered == merge_result.renumbered


def test_the_client_packs_a_normalized_bundle(tmp_path):
    from codspeed_client.cli import main
    from codspeed_local.profiles import make_profile_folder

    folder = make_profile_folder(tmp_path / "profiles", 4242, ["t::a", "t::b"])
    assert main(["pack", str(folder), "-o", str(tmp_path / "shard.tar.gz")]) == 0
    packed = (tmp_path / "shard.tar.gz").read_bytes()
    again = io.BytesIO()
    normalizer = Normalizer(again, level=6)  # what the client uses: the standard library's zlib
    normalizer.feed(gzip.decompress(packed))
    index = normalizer.close()
    assert again.getvalue() == packed  # cut exactly where a normalizer cuts
    assert [m.name for m in index.members] == sorted(m.name for m in index.members)
    assert validate_bundle(io.BytesIO(packed)).pids == [4242]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([7, 42, 1234]), names, st.sampled_from([1, 6, 9])), min_size=1, max_size=4))
def test_splicing_bundles_the_client_packed_as_verified_extracts_to_what_the_merge_writes(shards):
    from codspeed_aggregator.domain.bundle import normalizing
    from tests.factories import packed

    datas = [
        tar_gz(profile_members(pid, [f"{b}{i}" for b in benchmarks])) for i, (pid, benchmarks, _) in enumerate(shards)
    ]
    merged = io.BytesIO()
    merge_result = merge_bundles(
        [
            ShardBundle(str(i), tuple(validate_bundle(io.BytesIO(d)).pids), lambda d=d: io.BytesIO(d))
            for i, d in enumerate(datas)
        ],
        merged,
    )
    verified = []
    for i, (data, (_, _, level)) in enumerate(zip(datas, shards, strict=False)):
        bundle = packed(data, level=level)
        reading = normalizing(None)
        summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
        index = reading.close(summary.listing)
        verified.append(NormalizedShard(str(i), tuple(summary.pids), index, lambda b=bundle: io.BytesIO(b)))
    spliced = io.BytesIO()
    splice_result = splice(verified, spliced)
    assert _members(spliced.getvalue()) == _members(merged.getvalue())
    assert splice_result.renumbered == merge_result.renumbered
    assert gzip.decompress(spliced.getvalue()) == _first_member_only(spliced.getvalue())


def test_a_splice_whose_output_would_not_inflate_to_what_the_indexes_promise_is_refused_before_it_is_sent():
    copy, index = normalized(bundle(4242, ["t::a", "t::b"]))
    out = next(m for m in index.members if m.name.endswith(".out"))
    at = next(i for i, s in enumerate(out.segments) if s.kind == "body")
    out.segments[at] = out.segments[at]._replace(crc=out.segments[at].crc ^ 1)  # the index promises other
    # bytes than the object's: its object CRC-32 still matches
    with pytest.raises(
        IndexMismatch, match=r"the spliced archive inflates to \d+ bytes \(CRC-32 \d+\), not to the \d+ bytes"
    ):
        splice([NormalizedShard("1", (4242,), index, lambda: io.BytesIO(copy))], io.BytesIO())


def test_a_splice_checked_a_segment_a_thread_writes_the_very_archive_it_writes_checked_whole(monkeypatch):
    from codspeed_aggregator.domain import splice_check as splicing

    datas = [bundle(4242, ["t::a", "t::b"]), bundle(4242, ["t::c"]), bundle(77, ["t::d"])]
    shards = []
    for i, data in enumerate(datas):
        copy, index = normalized(data)
        shards.append(
            NormalizedShard(str(i), tuple(validate_bundle(io.BytesIO(data)).pids), index, lambda c=copy: io.BytesIO(c))
        )
    whole, pieces = io.BytesIO(), io.BytesIO()
    splice(shards, whole)
    monkeypatch.setattr(splicing, "PIECE", 1)  # every segment a piece of its own, on threads
    monkeypatch.setattr(splicing, "INLINE", 0)
    monkeypatch.setattr(splicing, "CHECK_THREADS", 3)
    splice(shards, pieces)
    assert pieces.getvalue() == whole.getvalue()
    assert _members(pieces.getvalue()) == _members(_both(datas)[0])


@pytest.mark.parametrize("inline", [0, 1 << 20], ids=["on threads", "by the writer"])
def test_a_piece_of_the_check_that_does_not_end_where_a_deflate_block_does_is_refused(monkeypatch, inline):
    """Inflated whole, the same bytes in the same order would pass: a piece is inflated alone, so it
    must end where a block does, or the next piece's inflate would not be the stream's."""
    from codspeed_aggregator.domain import splice_check as splicing

    monkeypatch.setattr(splicing, "INLINE", inline)
    copy, index = normalized(bundle(4242, ["t::a", "t::b"]))

    def moved(segments):
        segments["body"][2] -= 2  # the body ends two bytes early, inside its full flush; the pad starts there
        segments["pad"][1] -= 2
        segments["pad"][2] += 2

    index = _edited(index, moved)
    shard = NormalizedShard("1", (4242,), index, lambda: io.BytesIO(copy))
    splice([shard], io.BytesIO())  # checked in one piece: the bytes are the same
    monkeypatch.setattr(splicing, "PIECE", 1)
    out = io.BytesIO()
    with pytest.raises(IndexMismatch, match="a piece of the spliced archive does not end where a deflate block does"):
        splice([shard], out)
    with pytest.raises(EOFError):  # refused before its trailer: what was written is no archive
        gzip.decompress(out.getvalue())


def test_a_check_thread_that_fails_unforeseen_fails_the_splice_and_never_leaves_its_writer_waiting(monkeypatch):
    import threading

    from codspeed_aggregator.domain import splice_check as splicing

    def broken(self, packed):
        raise RuntimeError("the check broke")

    monkeypatch.setattr(splicing, "PIECE", 1)
    monkeypatch.setattr(splicing, "INLINE", 0)
    monkeypatch.setattr(splicing, "QUEUED", 1)  # a writer waits as soon as its piece's reader stops
    monkeypatch.setattr(splicing._PieceInflate, "feed", broken)
    members = profile_members(4242, ["t::a"])
    members["./runner.log"] = random.Random(7).randbytes(3 << 20)  # a segment of three chunks: its writer waits
    copy, index = normalized(tar_gz(members))
    raised = []

    def run():
        try:
            splice([NormalizedShard("1", (4242,), index, lambda: io.BytesIO(copy))], io.BytesIO())
        except RuntimeError as exc:
            raised.append(str(exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and raised == ["the check broke"]


def _counting_check(monkeypatch) -> list[int]:
    """The compressed bytes the splice's check inflates."""
    from codspeed_aggregator.domain import splice_check as splicing

    fed, feed = [], splicing._PieceInflate.feed

    def counted(self, packed):
        fed.append(len(packed))
        return feed(self, packed)

    monkeypatch.setattr(splicing._PieceInflate, "feed", counted)
    return fed


def _without_mark(index: Index) -> Index:
    return replace(index, inflated_alone=False)


def _edited(index: Index, change) -> Index:
    """The index with its callgrind file's segments changed by ``change`` (each a list, by kind), as
    its JSON lists them."""
    document = index.to_json()
    out = next(m for m in document["members"] if m["name"].endswith(".out"))
    change({segment[0]: segment for segment in out["segments"]})
    return Index.from_json(document)


def test_a_splice_inflates_again_only_what_no_arrival_inflated_alone(monkeypatch):
    members = profile_members(4242, ["t::a", "t::b"])
    members["./runner.log"] = random.Random(3).randbytes(1 << 20)  # the bulk: copied as it is
    datas = [tar_gz(members), bundle(4242, ["t::c"]), bundle(77, ["t::d"])]
    proven, checked = [], []
    for i, data in enumerate(datas):
        pids = tuple(validate_bundle(io.BytesIO(data)).pids)
        copy, index = normalized(data, prove=True)
        assert index.inflated_alone
        proven.append(NormalizedShard(str(i), pids, index, lambda c=copy: io.BytesIO(c)))
        checked.append(NormalizedShard(str(i), pids, _without_mark(index), lambda c=copy: io.BytesIO(c)))
    fed = _counting_check(monkeypatch)
    whole = io.BytesIO()
    splice(checked, whole)
    all_of_it, fed[:] = sum(fed), []
    out = io.BytesIO()
    splice(proven, out)
    assert out.getvalue() == whole.getvalue()  # the very same archive
    assert all_of_it >= len(whole.getvalue()) - 20  # unmarked, all but the gzip header and trailer is inflated
    assert sum(fed) < len(out.getvalue()) / 20  # marked, only what the splice encodes: headers, a moved pid's head
    assert _members(out.getvalue()) == _members(_both(datas)[0])


def _marked(data: bytes) -> tuple[bytes, Index]:
    copy, index = normalized(data, prove=True)
    assert index.inflated_alone
    return copy, index


def test_an_index_marked_inflated_alone_must_place_its_segments_and_add_up_to_its_tar():
    """The splice copies a marked index's segments unchecked: a segment the index places anywhere
    but right after the one before, or a length or CRC-32 the tar's own does not add up to, is
    refused before anything of the shard is written."""
    copy, index = _marked(bundle(4242, ["t::a", "t::b"]))

    def altered(change) -> Index:
        return _edited(index, change)

    def flip_crc(segments):
        segments["body"][4] ^= 1  # the object's CRC-32 still matches: only the index lies

    def shorten(segments):
        segments["body"][2] -= 2  # two compressed bytes of the body would never be copied

    for change, reason in (
        (
            flip_crc,
            r"its index's segments come to \d+ bytes \(CRC-32 \d+\) ending at byte \d+, "
            r"not to its tar's \d+ bytes",
        ),
        (shorten, r"its index places a pad segment at byte \d+, not \d+"),
    ):
        out = io.BytesIO()
        with pytest.raises(IndexMismatch, match=reason):
            splice([NormalizedShard("1", (4242,), altered(change), lambda: io.BytesIO(copy))], out)
        with pytest.raises(EOFError):  # refused before its trailer: what was written is no archive
            gzip.decompress(out.getvalue())
        checked = io.BytesIO()  # unmarked, the same index is refused by the check, after the fact
        with pytest.raises(IndexMismatch):
            splice([NormalizedShard("1", (4242,), _without_mark(altered(change)), lambda: io.BytesIO(copy))], checked)
    assert _spliced_with(copy, index).size > 0  # the untouched pair splices


def test_a_marked_object_that_changed_is_refused_before_the_archive_ends():
    copy, index = _marked(bundle(4242, ["t::a", "t::b"]))
    body = next(s for m in index.members if m.name.endswith(".out") for s in m.segments if s.kind == "body")
    altered = bytearray(copy)
    altered[body.offset + body.length // 2] ^= 0xFF  # inside a segment the splice copies without inflating it
    out = io.BytesIO()
    with pytest.raises(IndexMismatch, match="is not the one indexed"):
        splice([NormalizedShard("1", (4242,), index, lambda: io.BytesIO(bytes(altered)))], out)
    with pytest.raises(EOFError):
        gzip.decompress(out.getvalue())


def test_a_check_whose_last_piece_was_not_inflated_here_refuses_to_vouch_for_the_stream_s_end():
    from codspeed_aggregator.domain.splice_check import SpliceCheck

    comp = zlib.compressobj(1, zlib.DEFLATED, -15)
    check = SpliceCheck()
    try:
        check.feed(comp.compress(b"checked") + comp.flush(zlib.Z_FULL_FLUSH))
        check.gap()  # a segment written and not checked here: it may not be where the stream ends
        with pytest.raises(IndexMismatch, match="does not end with a segment checked here"):
            check.result()
    finally:
        check.stop()
