"""Build a run's report (the wire contract) from one consistent read of its records."""

from codspeed_wire.report import FINAL_STATES, Report, ShardEntry, UpstreamEntry

from .drop_in import display_label
from .ledger import OPEN, Snapshot
from .results import compare


def build_report(snapshot: Snapshot, now: str, *, baseline: Report | None = None, threshold: float = 0.05,
                 page_url: str | None = None) -> Report:
    """The report of one consistent read; its benchmarks compared with ``baseline`` (the
    baseline run's report) when there is one, and needs the shards' results (read with their names)."""
    run = snapshot.run
    outcome = run.outcome or {}
    carried = outcome.get("carried") or {}
    names = list(run.expected_names() or ())
    names += sorted(n for n in {*snapshot.shards, *run.skipped} if n not in names)
    entries = []
    for name in names:
        shard = snapshot.shards.get(name)
        if shard is not None:
            entries.append(
                ShardEntry(
                    name=name, label=shard.label, display=display_label(shard.label), executor=shard.executor, state=shard.state, attempt=shard.attempt,
                    size=shard.size, benchmarks=shard.benchmarks,
                    reason=shard.reason, arrived_at=shard.arrived_at,
                )
            )
        elif run.state == OPEN:
            entries.append(ShardEntry(name=name, state="expected"))
        elif name in carried:
            c = carried[name]
            entries.append(ShardEntry(name=name, state="carried", benchmarks=c.get("benchmarks"), size=c.get("size"),
                                      reason=f"carried from run {c['run_id']} (commit {(c['commit'] or '?')[:12]})",
                                      source={"run_id": c["run_id"], "commit": c["commit"]}))
        elif name in run.skipped:
            source = outcome.get("baseline")
            reason = (f"skipped, not carried: baseline run {source['run_id']} has no results of it" if source else
                      outcome.get("note") or "skipped at close: carried from the baseline run when the run is forwarded")
            entries.append(ShardEntry(name=name, state="skipped", reason=reason))
        else:
            entries.append(ShardEntry(name=name, state="missing"))
    upstream = UpstreamEntry(**run.upstream) if run.upstream else None
    where = None
    if baseline is not None:
        where = f"run {baseline.run_id} (commit {(baseline.commit or '?')[:12]})"
    arrived = snapshot.arrived()
    carried_from = {name: f"carried from run {c['run_id']} (commit {(c['commit'] or '?')[:12]})" for name, c in carried.items()}
    benchmarks = compare({name: s.results for name, s in sorted(arrived.items())}, run.state == OPEN, carried_from,
                         baseline.benchmarks if baseline else [], where, threshold)
    return Report(
        project=run.project,
        run_id=run.run_id,
        attempt=run.attempt,
        commit=run.commit,
        ref=run.ref,
        opened_at=run.created_at or None,
        ci_url=run.ci_url,
        state=run.state,
        partial=run.state not in FINAL_STATES,
        version=run.rev,
        expected=run.expected_count(),
        arrived=len(snapshot.arrived()),
        shards=entries,
        upstream=upstream,
        baseline=outcome.get("baseline") or (
            {"run_id": baseline.run_id, "commit": baseline.commit, "branch": None} if baseline else None),
        missing_benchmarks=outcome.get("missing_benchmarks") or [],
        benchmarks=benchmarks,
        threshold=threshold,
        page_url=page_url,
        generated_at=now,
    )
