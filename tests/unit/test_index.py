"""A normalized bundle's index as it is kept (JSON beside the bundle): written by ``to_json``,
read by ``from_json``, and the document 1.0.0 wrote read as it is."""

import gzip
import io
from dataclasses import asdict

import pytest

from codspeed_aggregator.domain.part_answers import Delivered
from codspeed_aggregator.domain.records import ARRIVED, NormalizedCopy, ShardRecord, ShardSent
from codspeed_rules.index import Index, IndexUnreadable, MadeFrom, Member, Sealed, Segment
from codspeed_rules.normalize import Normalizer
from tests.factories import bundle

# What 1.0.0 kept for a bundle of one folder and one file: its shape (the numbers are made up).
WRITTEN_BY_1_0_0 = {
    "format": 1,
    "members": [
        {
            "name": "",
            "type": "dir",
            "mode": 0o755,
            "mtime": 1_700_000_000,
            "size": 0,
            "pid_lines": 0,
            "segments": [["header", 16, 40, 512, 111]],
        },
        {
            "name": "4242.out",
            "type": "file",
            "mode": 0o644,
            "mtime": 1_700_000_000,
            "size": 700,
            "pid_lines": 1,
            "segments": [
                ["header", 56, 45, 512, 222],
                ["head", 101, 30, 120, 333],
                ["body", 131, 200, 580, 444],
                ["pad", 331, 9, 324, 555],
            ],
        },
    ],
    "end": ["end", 340, 14, 1024, 666],
    "crc": 777,
    "size": 2_560,
    "object": {"size": 362, "crc32": 888},
    "inflated_alone": True,
    "bundle": {"key": "bundles/p/r/1/u.tar.gz", "version": "v1"},
}


def _made() -> Index:
    normalizer = Normalizer(io.BytesIO())
    normalizer.feed(gzip.decompress(bundle(4242, ["t::a", "t::b"])))
    index = normalizer.close()
    assert index is not None
    return index


def test_an_index_reads_back_as_it_was_written():
    index = _made()
    index.bundle = MadeFrom("bundles/p/r/1/u.tar.gz", None)
    assert Index.from_json(index.to_json()) == index
    assert len(index.members) == 5 and index.end is not None and not index.inflated_alone


def test_the_document_1_0_0_wrote_is_read_and_written_again_as_it_was():
    index = Index.from_json(WRITTEN_BY_1_0_0)
    out = index.members[1]
    assert (out.name, out.type, out.size, out.pid_lines) == ("4242.out", "file", 700, 1)
    assert out.segments[1] == Segment("head", 101, 30, 120, 333)
    assert index.object == Sealed(362, 888) and index.inflated_alone
    assert index.bundle == MadeFrom("bundles/p/r/1/u.tar.gz", "v1")
    assert index.to_json() == WRITTEN_BY_1_0_0


def test_an_index_without_its_mark_or_bundle_writes_neither():
    index = Index([Member("", "dir", 0o755, 0, 0)], None, 0, 0, Sealed(26, 1))
    document = index.to_json()
    assert "inflated_alone" not in document and "bundle" not in document and document["end"] is None
    assert Index.from_json(document) == index


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({**WRITTEN_BY_1_0_0, "format": 2}, "index format 2 is not 1"),
        ({k: v for k, v in WRITTEN_BY_1_0_0.items() if k != "format"}, "index format None is not 1"),
        ([WRITTEN_BY_1_0_0], "index format 'list' is not 1"),
        ({k: v for k, v in WRITTEN_BY_1_0_0.items() if k != "object"}, "not an index of format 1: KeyError: 'object'"),
        ({**WRITTEN_BY_1_0_0, "end": ["end", 340, 14]}, "not an index of format 1: ValueError: not enough values"),
        (
            {**WRITTEN_BY_1_0_0, "members": [{**WRITTEN_BY_1_0_0["members"][0], "mode": "rwx"}]},
            "not an index of format 1: ValueError: invalid literal for int",
        ),
    ],
    ids=["another format", "no format", "not an object", "no object", "a short segment", "a mode not a number"],
)
def test_a_document_that_is_no_index_of_this_format_is_refused_with_what_is_wrong(document, said):
    with pytest.raises(IndexUnreadable, match=said.replace("(", r"\(")):
        Index.from_json(document)


def test_a_shard_record_reads_back_with_its_copy_and_its_send_as_it_was_written():
    shard = ShardRecord(
        "1",
        ARRIVED,
        normalized=NormalizedCopy("normalized/p/r/1/u.tar.gz", "v2", "v3"),
        upstream=ShardSent("part-1", run_id="up-1", size=10, md5="m"),
    )
    assert ShardRecord.from_item(asdict(shard)) == shard
    failed = ShardSent("part-1", error="503 from the upstream")
    assert ShardRecord.from_item(asdict(ShardRecord("2", ARRIVED, upstream=failed))).upstream == failed
    assert failed.to_item() == {"part": "part-1", "error": "503 from the upstream"}  # as 1.0.0 kept it


def test_a_shard_record_1_0_0_wrote_is_read_and_a_field_it_no_longer_has_is_left():
    written = {
        "name": "1",
        "state": ARRIVED,
        "normalized": {"key": "k", "version": None, "index_version": "v"},
        "upstream": {"run_id": "up-1", "size": 10, "md5": "m", "part": "p"},
        "a_field_gone": 1,
    }
    shard = ShardRecord.from_item(written)
    assert shard.normalized == NormalizedCopy("k", None, "v")
    assert shard.upstream == ShardSent("p", run_id="up-1", size=10, md5="m")
    assert shard.upstream.answer() == Delivered("up-1", 10, "m")
