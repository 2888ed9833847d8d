"""A run's benchmark counts in words: the line a reviewer reads first, in the report's Markdown
and in ``codspeed-client status`` alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .names import Shown

OVERLAPS_NAMED = 10  # benchmarks measured twice a sentence names; it counts the rest


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def listed(shards: Sequence[Shown], most: int | None = None, say: Callable[[str], str] = str) -> str:
    """Shards named in a sentence, as their readers know them (``say``: escaped for the page or Markdown);
    past ``most``, the rest counted."""
    named = ", ".join(say(shard) for shard in shards[:most])
    return named + (f" and {len(shards) - most} more" if most is not None and len(shards) > most else "")


def shown_state(state: str) -> str:
    """A shard's state as people read it: one still to come is ``running`` (its state ``expected``)."""
    return "running" if state == "expected" else state


def uploads_said(uploads: int) -> str:
    """A shard's uploads in this attempt of its run, past the first: it was pushed again."""
    return f"pushed again: upload {uploads} of this attempt"


def shards_done(arrived: int, carried: int, expected: object, then: str = " in") -> str:
    """``3/3 shards in (1 measured, 2 carried)``: a carried shard is done, its benchmarks the baseline's."""
    said = f"{arrived + carried}/{expected} shard{'' if expected == 1 else 's'}{then}"
    return said + (f" ({arrived} measured, {carried} carried)" if carried else "")


def counts_line(counts: Mapping[str, Any]) -> str:
    """``3 regressions (worst +30.0%), 1 improvement, 16 unchanged``, then the kinds a run has
    only sometimes (new, carried, running; benchmarks missing) when there are any."""
    worst = f" (worst {counts['worst_regression']:+.1%})" if counts.get("worst_regression") is not None else ""
    parts = [
        plural(counts.get("regressions") or 0, "regression") + worst,
        plural(counts.get("improvements") or 0, "improvement"),
        f"{counts.get('unchanged') or 0} unchanged",
    ]
    parts += [f"{counts[k]} {k}" for k in ("new", "carried", "running") if counts.get(k)]
    if counts.get("missing"):  # benchmarks the baseline has and no shard measured: not a shard missing
        parts.append(f"{plural(counts['missing'], 'benchmark')} missing")
    return ", ".join(parts)


def overlaps_named(overlaps: Sequence[Mapping[str, Any]], total: int, say: Callable[[str], str] = str) -> str:
    """``N: a::one (valgrind) in 1, 2; …``: the benchmarks measured in more than one shard (the
    report's ``overlaps`` and ``overlaps_total``), each text made fit by ``say`` for where it is shown."""
    named = "; ".join(
        f"{say(o['benchmark'])} ({say(o['executor'])}) in {say(', '.join(o['shards']))}"
        + (f" and {o['in_shards'] - len(o['shards'])} more" if o["in_shards"] > len(o["shards"]) else "")
        for o in overlaps[:OVERLAPS_NAMED]
    )
    more = total - min(len(overlaps), OVERLAPS_NAMED)
    return f"({total}): {named}" + (f"; and {more} more" if more > 0 else "")
