"""Which pids a merge renumbers: the first shard to name a pid keeps it, a later one moves to a
free pid of the same width (so a ``.out`` keeps its size), a wider one only when none is free."""

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, Protocol


def plan_pids(shards: Iterable[tuple[str, Iterable[int]]]) -> dict[str, dict[int, int]]:
    """For each shard, the pids to renumber (old to new), every shard's pids known up front: a
    moved pid avoids every pid of every shard."""
    shards = [(name, list(pids)) for name, pids in shards]
    taken = {pid for _, pids in shards for pid in pids}
    used: set[int] = set()
    return {name: _moves(pids, used, taken) for name, pids in shards}


def planned(shards: Iterable[Any], as_they_come: bool = False) -> Iterator[tuple[Any, dict[int, int]]]:
    """Each shard (with ``name`` and ``pids``) and the pids it renumbers: planned up front, or as
    the shards come (each handed over as soon as it is verified): a moved pid then avoids the
    pids of the shards before it, as the one-read merge plans the bundles it checks."""
    if as_they_come:
        used: set[int] = set()
        for shard in shards:
            yield shard, _moves(shard.pids, used, used)
        return
    shards = list(shards)
    plan = plan_pids((s.name, s.pids) for s in shards)
    for shard in shards:
        yield shard, plan[shard.name]


def _moves(pids: Iterable[int], used: set[int], taken: set[int]) -> dict[int, int]:
    moves = {}
    for pid in pids:
        if pid in used:
            new = _free_pid(pid, taken)
            taken.add(new)
            moves[pid] = new
            pid = new
        used.add(pid)
    return moves


class PidMoves(Protocol):
    """Where a shard's pids move: planned up front (a dict), or as its bundle streams (``StreamedMoves``)."""

    def get(self, pid: int, /) -> int | None: ...


class StreamedMoves:
    """Pids planned as the bundles stream, for bundles not validated before (so read once): the
    first shard to name a pid keeps it; a later one moves to a free pid of the same width. ``get``
    answers a pid's new number, or None when it stays, as the plan's dict does."""

    def __init__(self, used: set[int]) -> None:
        self.used = used
        self.moves: dict[int, int | None] = {}

    def get(self, pid: int) -> int | None:
        if pid not in self.moves:
            if pid in self.used:
                self.moves[pid] = free = _free_pid(pid, self.used)
                self.used.add(free)
            else:
                self.used.add(pid)
                self.moves[pid] = None
        return self.moves[pid]

    def moved(self) -> dict[int, int]:
        return {old: new for old, new in self.moves.items() if new is not None}


def _free_pid(pid: int, taken: set[int]) -> int:
    """The next pid of the same width that nobody uses (lazily: O(1) memory), else a wider one."""
    width = len(str(pid))
    low: int = 0 if width == 1 else 10 ** (width - 1)
    high: int = 10**width
    for candidate in itertools.chain(range(pid + 1, high), range(low, pid)):
        if candidate not in taken:
            return candidate
    wider = high
    while wider in taken:
        wider += 1
    return wider
