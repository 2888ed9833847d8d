"""A bundle the client normalized is verified, never trusted: its index is made from what is read,
and a bundle marked as normalized that is not cut as a normalizer cuts is refused for it."""

import gzip
import io
import struct
import subprocess
import tarfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain import gz
from codspeed_aggregator.domain.bundle import normalizing, validate_bundle
from codspeed_rules import bundle as rules
from codspeed_rules.deflate import closed
from codspeed_rules.index import Index, Sealed
from codspeed_rules.normalize import GZIP_HEADER, NORMALIZED_HEADER, Normalizer
from codspeed_rules.verify import Normalizing, NotNormalized, Verifier
from tests.factories import arrival, profile_members, segment_ends, tar_gz

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pytest_codspeed"
REAL = ["valgrind-shard-1.tar.gz", "valgrind-shard-2.tar.gz", "walltime-shard-1.tar"]


def packed(data: bytes, level: int = 6, **kwargs) -> tuple[bytes, Index]:
    """What ``codspeed-client pack`` makes of a bundle's tar: normalized with the standard library."""
    tar = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    out = io.BytesIO()
    normalizer = Normalizer(out, level=level, **kwargs)
    normalizer.feed(tar)
    index = normalizer.close()
    return out.getvalue(), index


def inflated_alone(index: Index) -> Index:
    """The index a verifier makes of what a normalizer wrote: marked, for it inflated every segment."""
    return replace(index, inflated_alone=True)


def shape(index: Index) -> Index:
    """An index without where its segments sit in the object (several places can be right: a
    stored block that ends with the bytes a full flush ends with closes its segment too)."""

    def unplaced(segment):
        return segment._replace(offset=0, length=0)

    return replace(
        index,
        object=Sealed(0, 0),
        end=unplaced(index.end) if index.end else None,
        members=[replace(m, segments=[unplaced(s) for s in m.segments]) for m in index.members],
    )


def stand_alone(bundle: bytes, index: Index) -> bool:
    """Every segment inflates alone to its length and CRC-32, and ends closed."""
    for member in index.members:
        for _kind, offset, length, unpacked, crc in member.segments:
            inflate = zlib.decompressobj(-15)
            data = inflate.decompress(bundle[offset : offset + length])
            if (len(data), zlib.crc32(data)) != (unpacked, crc) or not closed(inflate):
                return False
    return True


def verified(data: bytes, executor: str = "valgrind") -> tuple[rules.BundleSummary, Index | None]:
    reading = normalizing(None)
    summary = validate_bundle(io.BytesIO(data), executor, gunzip=reading.gunzip, tap=reading.tap)
    assert reading.verifier is not None
    return summary, reading.close(summary.listing)


@pytest.mark.parametrize("name", REAL)
def test_a_packed_real_bundle_verifies_to_the_index_its_normalizer_wrote(name, tmp_path):
    executor = "walltime" if name.startswith("walltime") else "valgrind"
    bundle, index = packed((FIXTURES / name).read_bytes())
    summary, found = verified(bundle, executor)
    assert not index.inflated_alone  # the client's pack proves nothing to the aggregator
    assert found == inflated_alone(index) and stand_alone(bundle, found)
    assert summary == validate_bundle(io.BytesIO(bundle), executor)  # what a plain read finds
    # the standard library's inflater and CRC verify alike (the client's, and a reader without isal)
    reading = Normalizing(None, rules.stdlib_gunzip)
    plain = rules.validate_bundle(io.BytesIO(bundle), executor, gunzip=reading.gunzip, tap=reading.tap)
    assert reading.close(plain.listing) == inflated_alone(index)
    # the mark is an extra field every gzip reader skips
    assert bundle.startswith(NORMALIZED_HEADER) and gzip.decompress(bundle)
    path = tmp_path / "packed.tar.gz"
    path.write_bytes(bundle)
    assert subprocess.run(["gzip", "-t", str(path)]).returncode == 0
    assert subprocess.run(["tar", "-tzf", str(path)], capture_output=True, check=True).stdout


def test_flush_bytes_inside_the_data_are_not_taken_for_cuts():
    # level 0 stores the data as it is: the bytes a full flush ends with appear inside members
    members = profile_members(4242, ["t::a"])
    members["./perf-4242.map"] = b"\x00\x00\xff\xff" * 5000
    members["./runner.log"] = b"x" * 511 + b"\x00\x00\xff\xff"
    for level in (0, 1, 6, 9):
        bundle, index = packed(tar_gz(members), level=level)
        assert bundle.count(b"\x00\x00\xff\xff") > len(index.members) * 3
        found = verified(bundle)[1]
        assert shape(found) == shape(inflated_alone(index)) and stand_alone(bundle, found)


def test_only_a_closed_segment_passes_the_closing_test():
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = b"callgrind cost lines " * 500
    full = comp.compress(data) + comp.flush(zlib.Z_FULL_FLUSH)
    open_block = zlib.compressobj(6, zlib.DEFLATED, -15)
    partial = open_block.compress(
        "".join(f"{i * 7919 % 100003} " for i in range(200_000)).encode()
    )  # blocks unfinished
    final = zlib.compressobj(6, zlib.DEFLATED, -15)
    finished = final.compress(data) + final.flush()
    stored_open = b"\x00" + struct.pack("<HH", 10, 0xFFFF ^ 10) + b"abc"  # a stored block of 10 bytes, 3 given

    def fed(stream: bytes):
        inflate = zlib.decompressobj(-15)
        inflate.decompress(stream)
        return inflate

    assert closed(fed(full)) and closed(gz.raw_inflater()) is True
    assert len(partial) > 0 and not closed(fed(partial))
    assert not closed(fed(finished)) and not closed(fed(stored_open))
    isal = gz.raw_inflater()
    isal.decompress(stored_open)
    assert not closed(isal)


def _marked(deflate: bytes, tar: bytes) -> bytes:
    return NORMALIZED_HEADER + deflate + struct.pack("<II", zlib.crc32(tar), len(tar))


def _tar() -> bytes:
    return gzip.decompress(tar_gz(profile_members(4242, ["t::a", "t::b"])))


def test_a_marked_bundle_with_one_unbroken_deflate_stream_is_not_normalized():
    tar = _tar()
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    with pytest.raises(
        NotNormalized, match="a header segment ends the deflate stream: it cannot be copied into another"
    ):
        verified(_marked(comp.compress(tar) + comp.flush(), tar))


def test_a_marked_bundle_flushed_elsewhere_than_at_its_members_is_not_normalized():
    tar = _tar()
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflate = b"".join(
        comp.compress(tar[at : at + 700]) + comp.flush(zlib.Z_FULL_FLUSH) for at in range(0, len(tar), 700)
    )
    with pytest.raises(NotNormalized, match="does not end where the tar's member does"):
        verified(_marked(deflate + comp.flush(), tar))


def test_segments_that_refer_to_the_one_before_them_are_not_normalized():
    # a sync flush ends where a full flush would, but keeps the history: the same member twice
    # is then coded as a reference to the first
    tar = gzip.decompress(
        tar_gz(
            {
                "./4242.out": profile_members(4242, ["t::a"])["./4242.out"],
                "./copy.txt": b"the same bytes again and again\n" * 200,
                "./again.txt": b"the same bytes again and again\n" * 200,
            }
        )
    )
    bundle, _ = packed(tar, full_flush=zlib.Z_SYNC_FLUSH)
    with pytest.raises(NotNormalized, match="does not inflate alone"):
        verified(bundle)


def test_a_marked_bundle_with_bytes_after_its_trailer_is_not_normalized():
    bundle, _ = packed(_tar())
    with pytest.raises(NotNormalized, match="after its trailer"):
        verified(bundle + gzip.compress(b"more"))


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b[:-8] + bytes([b[-8] ^ 1]) + b[-7:], "truncated or corrupt"),
        (lambda b: b[: len(b) // 2], "truncated or corrupt"),
    ],
)
def test_a_damaged_marked_bundle_is_refused_as_any_damaged_bundle(damage, reason):
    bundle, _ = packed(_tar())
    with pytest.raises(rules.BadBundle, match=reason):
        verified(damage(bundle))


def test_an_unmarked_bundle_is_not_verified_and_without_a_normalizer_is_refused_for_it():
    bundle, _ = packed(_tar())
    plain = GZIP_HEADER + bundle[len(NORMALIZED_HEADER) :]  # the same stream, without the mark
    reading = normalizing(None)
    with pytest.raises(NotNormalized, match="not marked"):
        validate_bundle(io.BytesIO(plain), gunzip=reading.gunzip, tap=reading.tap)
    out = io.BytesIO()
    reading = normalizing(out)
    summary = validate_bundle(io.BytesIO(plain), gunzip=reading.gunzip, tap=reading.tap)
    assert reading.verifier is None and reading.close(summary.listing) is not None and summary.pids == [4242]
    assert gzip.decompress(out.getvalue()) == _tar()


def test_without_verifying_a_marked_bundle_is_normalized_again():
    tar = _tar()
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    bundle = _marked(comp.compress(tar) + comp.flush(), tar)  # marked, not cut
    out = io.BytesIO()
    reading = normalizing(out, verify=False)
    summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
    index = reading.close(summary.listing)
    assert reading.verifier is None and gzip.decompress(out.getvalue()) == tar
    assert verified(out.getvalue())[1] == index  # the copy made is itself normalized


members = st.dictionaries(
    st.sampled_from(["./runner.log", "./a/b.txt", "./results/7.json", "./perf-7.map", "./x" * 60]),
    st.binary(max_size=3000) | st.sampled_from([b"", b"\x00\x00\xff\xff" * 300, b"pid: 3\n" * 100]),
    max_size=4,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members, st.sampled_from([0, 1, 6, 9]), st.integers(min_value=1, max_value=5000))
def test_any_packed_bundle_verifies_to_its_index_whatever_the_reads(extra, level, read_size):
    files = {**profile_members(7, ["t::a"]), **extra}
    bundle, index = packed(tar_gz(files), level=level)

    class Trickling(io.BytesIO):  # reads of any size, as an S3 body may answer
        def read(self, n=-1):
            return super().read(min(n, read_size) if n >= 0 else read_size)

    reading = normalizing(None)
    summary = validate_bundle(Trickling(bundle), gunzip=reading.gunzip, tap=reading.tap)
    found = reading.close(summary.listing)
    assert shape(found) == shape(inflated_alone(index)) and stand_alone(bundle, found)
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        assert sorted(m.name for m in tar.getmembers()) == sorted(files)
    assert found.object == index.object == Sealed(len(bundle), zlib.crc32(bundle))


def test_a_verified_bundle_inflates_a_bounded_piece_at_a_time():
    members = profile_members(4242, ["t::a"])
    members["./zeros.bin"] = bytes(40 << 20)  # 40 MiB that deflate packs into about 40 KB
    bundle, index = packed(tar_gz(members), level=9)
    assert len(bundle) < 200_000
    raw = io.BytesIO(bundle)
    raw.read(len(NORMALIZED_HEADER))
    verifier = Verifier(raw, gz.raw_inflater)
    sizes = []
    while piece := verifier.read():
        sizes.append(len(piece))
    assert max(sizes) <= rules.CHUNK and sum(sizes) == index.size and verifier.index == inflated_alone(index)


def _pax_overridden(field: str, value: str) -> bytes:
    """A tar whose runner.log has a PAX record overriding its header's ``field``: tarfile reads
    the record, a walk of the headers does not."""
    members = profile_members(4242, ["t::a"])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(content), 1_700_000_000
            if name == "./runner.log":
                info.pax_headers = {field: value}
            tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


@pytest.mark.parametrize("field, value", [("size", "3"), ("mtime", "1700000005")])
@pytest.mark.parametrize("marked", [True, False])
def test_a_tar_read_otherwise_than_its_headers_say_is_not_indexed(field, value, marked):
    tar = _pax_overridden(field, value)
    bundle = packed(tar)[0] if marked else gzip.compress(tar)
    out = io.BytesIO()
    reading = normalizing(out)
    summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
    assert (reading.verifier is not None) == marked
    assert reading.close(summary.listing) is None  # merged from what validation read, never spliced
    listed = dict((path, rest) for path, *rest in summary.listing)
    assert listed["runner.log"][1] == (3 if field == "size" else 11)  # "runner log\n": tarfile's view


@pytest.mark.parametrize("marked", [True, False])
def test_a_sub_second_pax_mtime_is_harmless_the_bundle_is_indexed_and_spliced_as_the_merge_writes_it(marked):
    from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles
    from codspeed_aggregator.domain.splice import NormalizedShard, splice

    tar = _pax_overridden("mtime", "1700000000.5")  # what Python's tarfile writes for a file modified mid-second
    bundle = packed(tar)[0] if marked else gzip.compress(tar)
    out = io.BytesIO()
    reading = normalizing(out)
    summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
    index = reading.close(summary.listing)
    assert index is not None
    copy = bundle if marked else out.getvalue()
    spliced, merged = io.BytesIO(), io.BytesIO()
    splice([NormalizedShard("1", tuple(summary.pids), index, lambda: io.BytesIO(copy))], spliced)
    merge_bundles([ShardBundle("1", tuple(summary.pids), lambda: io.BytesIO(bundle))], merged)
    with (
        tarfile.open(fileobj=io.BytesIO(spliced.getvalue())) as a,
        tarfile.open(fileobj=io.BytesIO(merged.getvalue())) as b,
    ):
        assert [(m.name, m.size, m.mtime) for m in a.getmembers()] == [
            (m.name, m.size, m.mtime) for m in b.getmembers()
        ]


def _cut_at(tar: bytes, cuts: list[int], finish_last: bool) -> bytes:
    """A marked bundle of ``tar`` full-flushed at each offset of ``cuts``; the last piece ends the
    stream with Z_FINISH (a final block of data) or, as a normalizer writes, an empty final block."""
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    pieces = [tar[a:b] for a, b in zip([0, *cuts], [*cuts, len(tar)], strict=False)]
    deflate = b"".join(comp.compress(p) + comp.flush(zlib.Z_FULL_FLUSH) for p in pieces[:-1])
    deflate += comp.compress(pieces[-1]) + (
        comp.flush() if finish_last else comp.flush(zlib.Z_FULL_FLUSH) + b"\x03\x00"
    )
    return _marked(deflate, tar)


def _splice_after_arrival(bundle: bytes) -> bytes:
    """What an arrival and a splice make of a bundle."""
    from codspeed_aggregator.domain.splice import NormalizedShard, splice

    pids, index, copy = arrival(bundle)
    spliced = io.BytesIO()
    splice([NormalizedShard("1", tuple(pids), index, lambda: io.BytesIO(copy))], spliced)
    return spliced.getvalue()


def test_a_bundle_without_end_of_archive_whose_last_segment_finishes_the_stream_is_normalized_again():
    tar = _tar()
    without_end = tar[: segment_ends(tar)[-1]]  # GNU tar reads it; its last member's padding ends it
    bad = _cut_at(without_end, segment_ends(without_end)[:-1], finish_last=True)
    with pytest.raises(NotNormalized, match="a pad segment ends the deflate stream: it cannot be copied into another"):
        verified(bad)
    spliced = _splice_after_arrival(bad)
    members = _members_of(gzip.decompress(spliced))  # gzip's CRC-32 and length check pass
    assert members == _members_of(without_end)


def test_a_header_segment_that_runs_into_the_callgrind_head_is_normalized_again():
    tar = _tar()
    cuts = segment_ends(tar)
    bad = _cut_at(tar, [cuts[0] + 13, *cuts[1:-1]], finish_last=False)  # the first flush 13 bytes into the .out head
    with pytest.raises(NotNormalized, match="a header segment inflates to 525 bytes where the tar's header is 512"):
        verified(bad)
    assert _members_of(gzip.decompress(_splice_after_arrival(bad))) == _members_of(tar)


def _members_of(tar: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(tar)) as opened:
        return {m.name.removeprefix("./"): opened.extractfile(m).read() for m in opened.getmembers() if m.isfile()}


def test_a_bundle_tarfile_writes_with_sub_second_mtimes_and_a_folder_entry_is_indexed():
    """tarfile keeps the exact mtime in a PAX record and rounds it into the ustar field (up, past
    the half second): the index and validation's listing then differ by under a second."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folder = tarfile.TarInfo("./")
        folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000.25
        tar.addfile(folder)
        for name, content in profile_members(4242, ["t::a"]).items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(content), 1_700_000_000.75
            tar.addfile(info, io.BytesIO(content))
    out = io.BytesIO()
    reading = normalizing(out)
    summary = validate_bundle(io.BytesIO(gzip.compress(raw.getvalue())), gunzip=reading.gunzip, tap=reading.tap)
    index = reading.close(summary.listing)
    assert index is not None and {m.mtime for m in index.members[1:]} == {1_700_000_001}  # rounded up
    assert {mtime for *_, mtime in summary.listing[1:]} == {1_700_000_000.75}


def test_a_normalizer_that_proves_its_segments_marks_its_index_only_when_each_inflated_alone():
    """Arrivals inflate each segment as they write it, so that no forward inflates it again; a
    segment that does not inflate alone to what was written into it (here: flushed without a
    history reset, so it refers to the segment before it) leaves the index unmarked."""
    members = profile_members(4242, ["t::a", "t::b"])
    members["./runner.log"] = members["./4242.out"] * 3  # repeats what an earlier member holds
    tar = gzip.decompress(tar_gz(members))

    def made(**kwargs) -> tuple[bytes, Index]:
        out = io.BytesIO()
        normalizer = Normalizer(out, **kwargs)
        normalizer.feed(tar)
        index = normalizer.close()
        return out.getvalue(), index

    bundle, index = made(prove=gz.raw_inflater)
    assert index.inflated_alone and stand_alone(bundle, index)
    assert not made()[1].inflated_alone  # the client's pack: the aggregator verifies it instead
    referring, unproven = made(level=6, full_flush=zlib.Z_SYNC_FLUSH, prove=raw_zlib_inflater)
    with pytest.raises(zlib.error, match="too far back"):  # the case is real: a segment refers back
        stand_alone(referring, unproven)
    assert not unproven.inflated_alone and gzip.decompress(referring) == tar


def raw_zlib_inflater():
    return zlib.decompressobj(-15)
