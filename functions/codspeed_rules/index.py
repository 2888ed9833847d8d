"""A normalized bundle's index (``normalize`` says what the segments are): its members, each cut
into segments, and the object they sit in, bound to it by its size and CRC-32. Kept as JSON beside
the bundle; ``to_json`` and ``from_json`` are the one place its shape is written and read.
Standard library only: the client's wheel ships it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

FORMAT = 1
HEADER, HEAD, BODY, PAD, END = "header", "head", "body", "pad", "end"  # the kinds of segment
# An index's mark: when it was made, each segment but the end was inflated alone by a fresh inflater,
# came to its length and CRC-32 and ended closed (the object's CRC-32 binds it to those bytes).
INFLATED_ALONE = "inflated_alone"


class IndexUnreadable(ValueError):
    """A document that is not an index of this format."""


class Segment(NamedTuple):
    """One segment of a normalized bundle, as its index lists it (a JSON list, in this order)."""

    kind: str  # header, head, body, pad, end
    offset: int  # where its compressed bytes start in the object
    length: int  # its compressed bytes
    unpacked: int  # the tar bytes it inflates to
    crc: int  # their CRC-32


@dataclass
class Member:
    """A tar member as the normalizer walked its headers, and its segments in order."""

    name: str  # its path, without the leading ./
    type: str  # "file", "dir", or the tar's type flag
    mode: int
    mtime: int
    size: int
    pid_lines: int = 0  # a callgrind file's pid: lines
    segments: list[Segment] = field(default_factory=list)


@dataclass(frozen=True)
class Sealed:
    """The normalized object the segments sit in: its size and the CRC-32 of all its bytes."""

    size: int
    crc32: int


@dataclass(frozen=True)
class MadeFrom:
    """The bundle (its key and object version) an index was made from."""

    key: str
    version: str | None


@dataclass
class Index:
    members: list[Member]
    end: Segment | None  # the end-of-archive blocks, running to the gzip trailer
    crc: int  # the tar's CRC-32 and size
    size: int
    object: Sealed
    inflated_alone: bool = False  # see INFLATED_ALONE
    bundle: MadeFrom | None = None

    def segments(self) -> Iterator[Segment]:
        """Every segment in the order of the object."""
        for member in self.members:
            yield from member.segments
        if self.end is not None:
            yield self.end

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": FORMAT,
            "members": [
                {
                    "name": m.name,
                    "type": m.type,
                    "mode": m.mode,
                    "mtime": m.mtime,
                    "size": m.size,
                    "pid_lines": m.pid_lines,
                    "segments": [list(s) for s in m.segments],
                }
                for m in self.members
            ],
            "end": list(self.end) if self.end is not None else None,
            "crc": self.crc,
            "size": self.size,
            "object": {"size": self.object.size, "crc32": self.object.crc32},
        }
        if self.inflated_alone:
            document[INFLATED_ALONE] = True
        if self.bundle is not None:
            document["bundle"] = {"key": self.bundle.key, "version": self.bundle.version}
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Index:
        """The index a document holds; IndexUnreadable when it holds none of this format."""
        if not isinstance(document, Mapping) or document.get("format") != FORMAT:
            found = document.get("format") if isinstance(document, Mapping) else type(document).__name__
            raise IndexUnreadable(f"index format {found!r} is not {FORMAT}")
        try:
            made_from = document.get("bundle")
            return cls(
                members=[
                    Member(
                        name=str(m["name"]),
                        type=str(m["type"]),
                        mode=int(m["mode"]),
                        mtime=int(m["mtime"]),
                        size=int(m["size"]),
                        pid_lines=int(m["pid_lines"]),
                        segments=[_segment(s) for s in m["segments"]],
                    )
                    for m in document["members"]
                ],
                end=_segment(document["end"]) if document["end"] is not None else None,
                crc=int(document["crc"]),
                size=int(document["size"]),
                object=Sealed(int(document["object"]["size"]), int(document["object"]["crc32"])),
                inflated_alone=document.get(INFLATED_ALONE) is True,
                bundle=MadeFrom(made_from["key"], made_from.get("version")) if made_from else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexUnreadable(f"not an index of format {FORMAT}: {type(exc).__name__}: {exc}") from exc


def _segment(listed: list[Any]) -> Segment:
    kind, offset, length, unpacked, crc = listed
    return Segment(str(kind), int(offset), int(length), int(unpacked), int(crc))
