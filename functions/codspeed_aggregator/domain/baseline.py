"""What a closing run takes from its baseline run (the base branch's run at the change's base
commit, else its latest): results for the shards it skipped, each from the branch's latest run
that received it, and the benchmarks it lost."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from codspeed_rules.names import shard_key

from .outcome import CarriedShard, ChosenBaseline, Outcome
from .records import RunRecord, ShardRecord, Snapshot

MAX_LISTED = 200
MAX_LISTED_BYTES = 32 * 1024  # of the names listed: the run's item holds them, whatever a benchmark's name is
# a one-upload run's carried shard whose bundle expired: left to CodSpeed's baseline, as in the parts mode
BUNDLE_EXPIRED = "not in the upload: its bundle expired, so CodSpeed fills it from its baseline"
LOOKBACK = 20  # the branch's runs searched before the baseline for where a skipped shard was last received


def branch_of(ref: str | None) -> str | None:
    """The branch a ref names (``refs/heads/main`` or ``main``); None for pull requests and tags."""
    if not ref:
        return None
    if ref.startswith("refs/heads/"):
        return ref.removeprefix("refs/heads/")
    return None if ref.startswith("refs/") else ref


def result_sources(snapshot: Snapshot) -> dict[str, tuple[str, int]]:
    """Where a run's results are, by shard: the bundle (key) each shard's results were kept for,
    and its benchmark count; a carried shard's are its source run's bundle's."""
    kept: dict[str, CarriedShard | ShardRecord] = dict(snapshot.run.outcome.carried)
    kept |= {name: s for name, s in snapshot.arrived().items() if s.results_kept}
    return {name: (key, s.benchmarks or 0) for name, s in kept.items() if (key := s.key) is not None}


def baseline_why(run: RunRecord, baseline_commit: str | None, branch: str) -> str:
    """Why a run compares with the baseline it does, as its report says it."""
    if run.base_commit:
        at = run.base_commit[:12]
        found = (baseline_commit or "").lower()
        if found == run.base_commit:
            return f"{branch}'s run at the change's base commit {at}"
        if found in run.base_ancestors:
            back = run.base_ancestors.index(found) + 1
            return (
                f"{branch}'s run at {found[:12]}, {back} commit{'s' * (back > 1)} before the change's base commit "
                f"{at}: the nearest with a run"
            )
        among = f" or the {len(run.base_ancestors)} commits before it" if run.base_ancestors else ""
        return f"{branch}'s latest run: none was forwarded at the change's base commit {at}{among}"
    if branch_of(run.ref) == branch:
        return f"{branch}'s latest run before this one"
    return f"{branch}'s latest run: the change names no base commit"


def first_listed(names: list[str]) -> list[str]:
    """The first of ``names`` a report lists: ``MAX_LISTED`` at most, within ``MAX_LISTED_BYTES``."""
    kept, size = [], 0
    for name in names[:MAX_LISTED]:
        size += len(name.encode())
        if size > MAX_LISTED_BYTES:
            break
        kept.append(name)
    return kept


def skipped_keys(run: RunRecord, baseline: Snapshot | None) -> set[str]:
    """The shards a run's skips stand for: each skipped name under every executor the run or its
    baseline pushed shards of (a skip carries shard 1 of each executor), and the name itself."""
    executors = {*run.executors_of(""), *(baseline.run.executors_of("") if baseline else ())}
    return {shard_key(n, e) for n in run.skipped for e in executors} | set(run.skipped)


@dataclass
class Completion:
    """The shards carried from the baseline, and the outcome stored on the run for its report."""

    carried: dict[str, ShardRecord] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)


def _lost(
    arrived: dict[str, ShardRecord],
    received: dict[str, ShardRecord],
    carried: dict[str, tuple[RunRecord, ShardRecord]],
    skipped: set[str],
    names: dict[str, list[str]],
) -> list[str]:
    """The baseline's benchmarks the run neither measured nor carried, that no skipped shard left
    uncarried explains (``names``: each bundle's benchmark names, by key)."""

    def of(shard: ShardRecord) -> Iterable[str]:
        return names.get(shard.key) or () if shard.key else ()

    explained = {b for name in skipped if name not in carried and name in received for b in of(received[name])}
    present = {b for shard in (*arrived.values(), *(s for _, s in carried.values())) for b in of(shard)}
    return sorted({b for shard in received.values() for b in of(shard)} - present - explained)


def complete(
    run: RunRecord,
    arrived: dict[str, ShardRecord],
    branch: str,
    baseline: Snapshot | None,
    names: dict[str, list[str]] | None = None,
    earlier: dict[str, tuple[RunRecord, ShardRecord]] | None = None,
) -> Completion:
    """What a run takes from its baseline; ``names`` has the benchmark names of each shard's
    bundle (by key, of this run's and the baseline's), to tell which benchmarks the run lost
    (without it, none are looked for). A skipped shard the baseline run did not receive (it
    was carried or missing there) is carried from ``earlier``: the branch's latest run before
    it that received it, by shard."""
    if baseline is None:
        return Completion(
            outcome=Outcome(
                note=f"no forwarded run on {branch} yet: skipped shards stay skipped, nothing to compare with"
            )
        )
    received = baseline.arrived()
    sources = {**(earlier or {}), **{name: (baseline.run, s) for name, s in received.items()}}
    skipped = skipped_keys(run, baseline)
    carried = {name: sources[name] for name in sorted(skipped) if name in sources and name not in arrived}
    gone = _lost(arrived, received, carried, skipped, names) if names is not None else []
    return Completion(
        carried={name: s for name, (_, s) in carried.items()},
        outcome=Outcome(
            baseline=chosen_baseline(run, baseline.run, branch),
            carried={name: _carried_entry(source, s, branch) for name, (source, s) in carried.items()},
            missing_benchmarks=tuple(first_listed(gone)),
            missing_benchmarks_total=len(gone),
        ),
    )


def chosen_baseline(run: RunRecord, baseline: RunRecord, branch: str) -> ChosenBaseline:
    return ChosenBaseline(baseline.run_id, baseline.commit, branch, baseline_why(run, baseline.commit, branch))


def _carried_entry(source: RunRecord, shard: ShardRecord, branch: str) -> CarriedShard:
    """A carried shard as the outcome says it: the run and commit it was measured in, what it held."""
    return CarriedShard(
        run_id=source.run_id,
        commit=source.commit,
        branch=branch,
        benchmarks=shard.benchmarks,
        size=shard.size,
        group=shard.group,
        key=shard.key if shard.results_kept else None,
    )
