"""The run record as its item stores it: one mapping, read both ways. Each field is an attribute of
its own name (some keep the names earlier releases stored), in its own form where it has one, and so
is each field of a record of its own (its attempt, its close, its forward); the run's job groups,
their counts and its parts are kept elsewhere (an attribute a group, the tallies, the part items)."""

import json
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, fields
from functools import reduce
from typing import Any

from codspeed_wire.report import UpstreamEntry

from ...domain.attempts import RunAttempt
from ...domain.closing import Awaiting, CiOrigin, RunClose
from ...domain.forwarding import RunForward
from ...domain.identity import RunIdentity
from ...domain.manifest import Manifest
from ...domain.outcome import Outcome
from ...domain.plan_record import PlanRecord
from ...domain.records import OPEN, RunRecord
from .codec import CARRIED_PREFIX, COUNT_PREFIX, GROUP_PREFIX, RUN_SK, run_pk

# A field holding a record of its own: each of its fields is an attribute of its own name (named
# ``<field>.<its field>`` here), as when they were the run record's own
PARTS: dict[str, type] = {"attempt": RunAttempt, "close": RunClose, "forward": RunForward}
# the fields stored under another name: the names stored items have (1.0.0's, and the run record's own before
# its parts)
STORED_AS = {
    "attempt.number": "run_attempt",
    "attempt.ci": "ci_attempt",
    "close.requested": "close_requested",
    "close.by": "closed_by",
    "forward.error": "forward_error",
}
CARRIED_COUNT = "carried_shards"  # on a run item's outcome: its carried shards are items beside it
# kept elsewhere than an attribute of their own: the group attributes and the tallies, the part items
ELSEWHERE = ("groups", "group_counts", "arrived_count", "forwarded_parts", "announced_parts")
# written with the run's first item whatever their value; any other field only where the run has one
ALWAYS = frozenset(
    {"project", "run_id", "state", "commit", "ref", "base_ref", "base_commit", "identity", "created_at"}
    | {"deadline_at", "rev", "run_changes", "attempt.number", "ci_url"}
)


def _outcome(kept: dict[str, Any]) -> Outcome:
    return Outcome.from_item({k: v for k, v in kept.items() if k != CARRIED_COUNT})


# A field kept in another form than the record's: (to the item, from the item)
FORMS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "identity": (lambda v: v.to_json() if v else "null", RunIdentity.from_json),
    "base_ancestors": (list, tuple),
    "skipped": (list, lambda v: tuple(dict.fromkeys(v))),
    "variants": (set, lambda v: tuple(sorted(v))),
    "forward.upstream": (lambda v: v.model_dump(exclude_none=True) if v else None, UpstreamEntry.model_validate),
    "close.by": (lambda v: v.to_item() if v else None, CiOrigin.from_item),
    "close.awaiting": (lambda v: v.to_item() if v else None, Awaiting.from_item),
    "forward.plan": (lambda v: json.dumps(v.to_item()), lambda v: PlanRecord.from_item(json.loads(v))),
    "outcome": (lambda v: v.to_item(), _outcome),
    "given_up": (dict, dict),
}


def group_attribute(group: str) -> str:
    return f"{GROUP_PREFIX}{group}"


def count_attribute(group: str) -> str:
    return f"{COUNT_PREFIX}{group}"


def attribute(name: str) -> str:
    """The attribute a run record's field (``close.by``: a field of its close) is stored under."""
    return STORED_AS.get(name, name.rpartition(".")[2])


def stored(name: str, value: Any) -> Any:
    """A field's value as its item keeps it."""
    to_item, _ = FORMS.get(name, (_same, _same))
    return to_item(value)


def _same(value: Any) -> Any:
    return value


def _stored_fields() -> Iterator[tuple[str, Field[Any]]]:
    """The record's fields its item keeps as attributes, by name: a part's fields as ``<part>.<field>``."""
    for f in fields(RunRecord):
        if f.name in PARTS:
            yield from ((f"{f.name}.{g.name}", g) for g in fields(PARTS[f.name]))
        elif f.name not in ELSEWHERE:
            yield f.name, f


def _read(name: str, field: Field[Any], raw: Any) -> Any:
    _, from_item = FORMS.get(name, (_same, _same))
    value = from_item(raw)
    return bool(value) if field.type in (bool, "bool") else value


def _default(field: Field[Any]) -> Any:
    return field.default_factory() if field.default_factory is not MISSING else field.default


def field_from(name: str, item: dict[str, Any]) -> Any:
    """One field of a run's record (``forward.plan``) from its item, or from those of its attributes read."""
    return _field(name, dict(_stored_fields())[name], item)


def _field(name: str, field: Field[Any], item: dict[str, Any]) -> Any:
    raw = item.get(attribute(name))
    return _read(name, field, raw) if raw is not None else _default(field)


def _parts(values: dict[str, Any]) -> dict[str, Any]:
    """The flat values with each part's gathered into its record."""
    whole = {name: value for name, value in values.items() if "." not in name}
    for part, record in PARTS.items():
        own = {name.partition(".")[2]: value for name, value in values.items() if name.startswith(f"{part}.")}
        whole[part] = record(**own)
    return whole


def run_from(item: dict[str, Any], tallies: list[dict[str, Any]]) -> RunRecord:
    """A run's record from its item and its tallies (those written so far). Its revision counts
    the run's own changes (its item's) and its shards' (its tallies')."""
    groups = {k.removeprefix(GROUP_PREFIX): v for k, v in item.items() if k.startswith(GROUP_PREFIX)}
    counts = _counts(item)
    for tally in tallies:
        for group, n in _counts(tally).items():
            counts[group] = counts.get(group, 0) + n
    values = {name: _field(name, f, item) for name, f in _stored_fields()}
    values["rev"] = item.get("rev", 0) + sum(t.get("rev", 0) for t in tallies)
    return RunRecord(
        **_parts(values),
        groups={g: Manifest.from_item(m) for g, m in groups.items()},
        group_counts=counts,
        arrived_count=sum(counts.values()),
    )


def run_item(run: RunRecord, expires_at: int) -> dict[str, Any]:
    """A new run's item: its fields (those it has: an item carries no empty attribute), an attribute
    per job group and its count."""
    item: dict[str, Any] = {
        "pk": run_pk(run.project, run.run_id),
        "sk": RUN_SK,
        "open_pk": OPEN,
        "expires_at": expires_at,
        "group_count": len(run.groups),  # what ``Runs.add_group`` and ``add_variant`` bound
        "variant_count": len(run.variants),
    }
    for name, f in _stored_fields():
        value = reduce(getattr, name.split("."), run)
        if name in ALWAYS or value != _default(f):
            item[attribute(name)] = stored(name, value)
    item |= {group_attribute(g): m.to_item() for g, m in run.groups.items()}
    return item | {count_attribute(g): n for g, n in run.group_counts.items()}


def _counts(item: dict[str, Any]) -> dict[str, int]:
    return {k.removeprefix(COUNT_PREFIX): int(v) for k, v in item.items() if k.startswith(COUNT_PREFIX)}


def carried_items(
    project: str, run_id: str, outcome: Outcome, expires_at: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A finished run's outcome as its item keeps it (how many shards it carried), and an item
    beside it for each: they are as many as its shards, and its item stays small."""
    kept = outcome.to_item()
    carried = kept.pop("carried")
    items = [
        {"pk": run_pk(project, run_id), "sk": f"{CARRIED_PREFIX}{name}", "carried": json.dumps(entry)}
        | {"expires_at": expires_at}
        for name, entry in carried.items()
    ]
    return kept | ({CARRIED_COUNT: len(carried)} if carried else {}), items


def carried_count(item: dict[str, Any]) -> int:
    """How many shards a run item's outcome carried: each is an item beside it."""
    return int((item.get("outcome") or {}).get(CARRIED_COUNT, 0))
