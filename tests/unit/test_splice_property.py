"""The splice against deflate streams nobody here wrote: any member set, cut anywhere with any
flush (none, sync, full, block, partial), stored blocks (level 0), a final block at the end or
mid-way in a gzip member of its own, with or without the normalized mark and end-of-archive.
Whatever an arrival makes of such a bundle (verified, or normalized again), the splice writes a
gzip that inflates, with its CRC-32 and length right, to exactly the members the merge writes.
``SPLICE_EXAMPLES=3000 pytest tests/unit/test_splice_property.py`` runs longer than ``make test``."""

import gzip
import io
import os
import struct
import tarfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain.bundle import normalizing, validate_bundle
from codspeed_aggregator.domain.merge import ShardBundle, merge_bundles
from codspeed_aggregator.domain.splice import IndexMismatch, NormalizedShard, splice
from codspeed_rules.normalize import GZIP_HEADER, NORMALIZED_HEADER
from codspeed_rules.tar import BadBundle
from codspeed_rules.verify import NotNormalized
from tests.factories import arrival, segment_ends

FLUSHES = [zlib.Z_NO_FLUSH, zlib.Z_SYNC_FLUSH, zlib.Z_FULL_FLUSH, zlib.Z_BLOCK, zlib.Z_PARTIAL_FLUSH]


def _callgrind(pid: int, benchmarks: int, filler: int) -> bytes:
    parts = b"".join(b"fl=a.py\nfn=f%d\n%d 7\n" % (i, i) for i in range(filler))
    triggers = b"".join(b"\ndesc: Trigger: Client Request: t::b%d\n" % i + parts for i in range(benchmarks))
    return b"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: %d\ncmd: python\n" % pid + triggers


contents = st.binary(max_size=1500) | st.sampled_from([b"", b"\x00\x00\xff\xff" * 100, b"\x00" * 1024])


@st.composite
def tars(draw) -> bytes:
    pid = draw(st.sampled_from([7, 42, 4242]))
    members = {f"./{pid}.out": _callgrind(pid, draw(st.integers(1, 4)), draw(st.integers(0, 40)))}
    for name in draw(
        st.lists(
            st.sampled_from(["./runner.log", f"./perf-{pid}.map", "./a/b.txt", "./x" * 50]), unique=True, max_size=3
        )
    ):
        members[name] = draw(contents)
    order = draw(st.permutations(list(members)))
    raw = io.BytesIO()
    form = draw(st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
    with tarfile.open(fileobj=raw, mode="w", format=form) as tar:
        for name in order:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(members[name]), draw(st.sampled_from([1_700_000_000, 1_700_000_000.25]))
            tar.addfile(info, io.BytesIO(members[name]))
    data = raw.getvalue()
    if draw(st.booleans()):  # no end-of-archive: what follows the last member is dropped
        data = data.rstrip(b"\0")
        data += b"\0" * (-len(data) % 512)
    return data


@st.composite
def bundles(draw) -> bytes:
    tar = draw(tars())
    cuts = set()
    for cut in segment_ends(tar):  # mostly where a normalizer cuts, so that verification is what is tested
        move = draw(st.sampled_from(["keep"] * 6 + ["drop", "shift"]))
        if move != "drop":
            cuts.add(min(len(tar), max(0, cut + (draw(st.integers(-40, 40)) if move == "shift" else 0))))
    cuts |= set(draw(st.lists(st.integers(0, len(tar)), max_size=3)))
    comp = zlib.compressobj(draw(st.sampled_from([0, 1, 6, 9])), zlib.DEFLATED, -15)
    deflate, at, finished_at = b"", 0, None
    for cut in sorted(cuts):
        flush = draw(st.sampled_from([zlib.Z_FULL_FLUSH] * 6 + FLUSHES))
        deflate += comp.compress(tar[at:cut]) + comp.flush(flush)
        at = cut
    if draw(st.booleans()) and 0 < at < len(tar):  # a final block mid-way: the rest in a gzip member of its own
        deflate += comp.flush()
        finished_at = at
    else:
        deflate += comp.compress(tar[at:]) + (
            comp.flush()
            if draw(st.booleans())
            # Z_FINISH: data in a final block
            else comp.flush(zlib.Z_FULL_FLUSH) + b"\x03\x00"
        )  # an empty one, as normalizers end
    marked = draw(st.sampled_from([True, True, True, False]))
    first = (NORMALIZED_HEADER if marked else GZIP_HEADER) + deflate
    if finished_at is None:
        return first + struct.pack("<II", zlib.crc32(tar), len(tar))
    head = tar[:finished_at]
    return first + struct.pack("<II", zlib.crc32(head), len(head)) + gzip.compress(tar[finished_at:], mtime=0)


def _members(tar: bytes) -> list:
    with tarfile.open(fileobj=io.BytesIO(tar)) as opened:
        return [
            (m.name, m.type, m.mode, m.mtime, opened.extractfile(m).read() if m.isfile() else None)
            for m in opened.getmembers()
        ]


@settings(
    max_examples=int(os.environ.get("SPLICE_EXAMPLES", 150)), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(st.lists(bundles(), min_size=1, max_size=3))
@pytest.mark.slow
def test_whatever_deflate_stream_a_bundle_holds_the_splice_writes_the_merges_members(datas):
    merged = io.BytesIO()
    try:
        merge_bundles(
            [
                ShardBundle(str(i), tuple(validate_bundle(io.BytesIO(d)).pids), lambda d=d: io.BytesIO(d))
                for i, d in enumerate(datas)
            ],
            merged,
        )
    except BadBundle:
        return  # a tar validation refuses is never spliced
    shards = []
    for i, data in enumerate(datas):
        pids, index, copy = arrival(data)
        if index is None:
            return  # not spliceable: the finalizer merges the bundles (what `merged` is)
        shards.append(NormalizedShard(str(i), tuple(pids), index, lambda c=copy: io.BytesIO(c)))
    spliced = io.BytesIO()
    try:
        splice(shards, spliced)
    except IndexMismatch:
        return  # refused before it was forwarded: the finalizer merges the bundles instead
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    tar = inflate.decompress(spliced.getvalue())  # raises on a CRC-32 or length the trailer gets wrong
    assert inflate.eof and not inflate.unused_data  # one gzip member, nothing after it
    assert _members(tar) == _members(gzip.decompress(merged.getvalue()))


FOREIGN = Path(__file__).resolve().parents[1] / "fixtures" / "foreign_deflate"


@pytest.mark.parametrize(
    "name, says",
    [
        ("final-block-in-the-last-pad.tar.gz", "a header segment inflates to 532 bytes where the tar.s header is 512"),
        ("pad-runs-past-its-member.tar.gz", "a pad segment inflates to 522 bytes where the tar's pad is 506"),
    ],
)
def test_streams_the_fuzz_found_are_normalized_again_and_spliced_whole(name, says):
    bundle = (FOREIGN / name).read_bytes()
    reading = normalizing(None)
    with pytest.raises(NotNormalized, match=says):
        validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
    pids, index, copy = arrival(bundle)
    assert copy is not bundle  # normalized into a copy of its own
    spliced = io.BytesIO()
    splice([NormalizedShard("1", tuple(pids), index, lambda: io.BytesIO(copy))], spliced)
    assert _members(gzip.decompress(spliced.getvalue())) == _members(gzip.decompress(_merged([bundle])))


def _merged(datas: list[bytes]) -> bytes:
    out = io.BytesIO()
    merge_bundles(
        [
            ShardBundle(str(i), tuple(validate_bundle(io.BytesIO(d)).pids), lambda d=d: io.BytesIO(d))
            for i, d in enumerate(datas)
        ],
        out,
    )
    return out.getvalue()
