"""How a record kept across releases is read and written: its fields by name, and a field this
release does not know kept as it came (``later_fields``), so that a release rolled back reads a
newer record and writes it back whole."""

from dataclasses import fields
from typing import Any, Self


def decoded(cls: type, item: dict[str, Any], **read: Any) -> Any:
    """``cls`` from a stored item: its fields by name (``read``: those decoded), the others kept."""
    known = {f.name for f in fields(cls)} - {"later_fields"}
    as_stored = {name: item[name] for name in known - set(read) if name in item}
    return cls(**as_stored, **read, later_fields={name: value for name, value in item.items() if name not in known})


def encoded(record: Any, **written: Any) -> dict[str, Any]:
    """A stored item of ``record``: its later fields first, so that none of its own is overwritten."""
    own = {f.name: getattr(record, f.name) for f in fields(record) if f.name != "later_fields"}
    return {**record.later_fields, **own, **written}


class Stored:
    """A record kept across releases, read and written by its fields' names: the dataclass declares
    ``later_fields``. One with fields of its own to decode or encode passes them to ``decoded`` and
    ``encoded``."""

    later_fields: dict[str, Any]

    def to_item(self) -> dict[str, Any]:
        return encoded(self)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Self:
        record: Self = decoded(cls, item)
        return record
