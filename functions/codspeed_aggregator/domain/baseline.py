"""What a closing run takes from its baseline run (the latest forwarded run of the project
on the baseline branch): results for the shards it skipped, and the benchmarks it lost."""

from dataclasses import dataclass, field

from .ledger import RunRecord, ShardRecord, Snapshot

MAX_LISTED = 200


def branch_of(ref: str | None) -> str | None:
    """The branch a ref names (``refs/heads/main`` or ``main``); None for pull requests and tags."""
    if not ref:
        return None
    if ref.startswith("refs/heads/"):
        return ref.removeprefix("refs/heads/")
    return None if ref.startswith("refs/") else ref


@dataclass
class Completion:
    """The shards carried from the baseline, and the outcome stored on the run for its report."""

    carried: dict[str, ShardRecord] = field(default_factory=dict)
    outcome: dict = field(default_factory=dict)


def complete(run: RunRecord, arrived: dict[str, ShardRecord], branch: str, baseline: Snapshot | None) -> Completion:
    if baseline is None:
        return Completion(outcome={
            "baseline": None, "carried": {}, "missing_benchmarks": [],
            "note": f"no forwarded run on {branch} yet: skipped shards stay skipped, nothing to compare with",
        })
    source = {"run_id": baseline.run.run_id, "commit": baseline.run.commit, "branch": branch}
    available = baseline.arrived()
    carried = {name: available[name] for name in run.skipped if name in available and name not in arrived}
    explained = {b for name in run.skipped if name not in carried for b in available.get(name, ShardRecord(name, "")).benchmark_names}
    present = {b for shard in (*arrived.values(), *carried.values()) for b in shard.benchmark_names}
    gone = sorted({b for shard in available.values() for b in shard.benchmark_names} - present - explained)
    return Completion(carried=carried, outcome={
        "baseline": source,
        "carried": {name: {**source, "benchmarks": s.benchmarks, "size": s.size} for name, s in carried.items()},
        "missing_benchmarks": gone[:MAX_LISTED],
        "missing_benchmarks_total": len(gone),
    })
