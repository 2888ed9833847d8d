"""Build a run's report (the wire contract) from one consistent read of its records and the
summaries of its shards' benchmarks."""

from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from codspeed_rules.names import Shown, shard_key, split_shard_key
from codspeed_wire.report import FINAL_STATES, Report, ShardEntry

from .baseline import chosen_baseline
from .closing import closing_said
from .drop_in import display_label
from .outcome import Outcome
from .records import OPEN, RunRecord, ShardRecord, Snapshot, sent_as
from .results import ShardSummary, combine

JOB_ENTRY = "job:"  # the report's entry of a job's uploads not in (no shard name or storage key has a colon)


def compared_with(run: RunRecord, baseline: Snapshot | None, branch: str) -> dict[str, Any] | None:
    """The baseline a run's report names: the one its finalizer chose, else the one it compares with
    while open (the latest forwarded on ``branch``, its base branch), and why."""
    chosen = run.outcome.baseline or (chosen_baseline(run, baseline.run, branch) if baseline else None)
    return chosen.to_item() if chosen else None


def shard_names(snapshot: Snapshot) -> list[str]:
    """A run's shards in the report's order: the manifest's, then the others by name."""
    run = snapshot.run
    expected = run.expected_names() or ()
    names = [shard_key(n, e) for n in expected for e in run.executors_of("")]
    carried = run.outcome.carried
    return names + sorted(n for n in {*snapshot.shards, *run.skipped, *carried} if n not in names and n not in expected)


def readable(name: str, label: str | None) -> str | None:
    """A readable form of a shard's name, where its label or key is not one: a runner's runPartId
    shortened, a pushed shard's executor named (the report's ``display``)."""
    shard, executor = split_shard_key(name)
    return display_label(label) or (f"{shard} ({executor})" if executor else None)


def shown_as(name: str, label: str | None) -> Shown:
    """How a reader says a shard (the domain's ``ShardEntry.shown``): readable, else its label, else
    its name (a pushed shard's, as its job pushed it)."""
    return Shown(readable(name, label) or label or name)


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000


def _not_sent(shard: ShardRecord) -> str | None:
    """A parts run's shard whose send upstream failed: said, until a retry sends it (or its finalizer does)."""
    error = shard.upstream.error if shard.upstream else None
    return f"not upstream yet, sent again shortly: {error}" if error else None


def shard_entry(snapshot: Snapshot, name: str) -> ShardEntry:
    """One shard of a run, as its report shows it."""
    run = snapshot.run
    shard = snapshot.shards.get(name)
    if shard is not None:
        return _recorded_entry(name, shard)
    display, skipped = readable(name, None), split_shard_key(name)[0] in run.skipped
    if run.state == OPEN:
        if skipped:  # declared when the run was opened
            return ShardEntry(
                name=name,
                display=display,
                state="skipped",
                reason="skipped on purpose when the run was opened: carried from the baseline run "
                "when the run is forwarded",
            )
        return ShardEntry(name=name, display=display, state="expected")
    if (c := run.outcome.carried.get(name)) is not None:
        return ShardEntry(
            name=name,
            display=display,
            state="carried",
            benchmarks=c.benchmarks,
            size=c.size,
            reason=c.said + (f"; {c.left_out}" if c.left_out else ""),
            source={"run_id": c.run_id, "commit": c.commit},
        )
    if skipped:
        return ShardEntry(name=name, display=display, state="skipped", reason=_not_carried(run.outcome))
    return ShardEntry(name=name, display=display, state="missing", reason=snapshot.run.given_up.get(name))


def _recorded_entry(name: str, shard: ShardRecord) -> ShardEntry:
    """A shard the run has a record of (asked for, arrived, rejected), with its part's answer once upstream."""
    sent = shard.upstream if sent_as(shard) is not None else None
    return ShardEntry(
        name=name,
        label=shard.label,
        display=readable(name, shard.label),
        executor=shard.executor,
        state=shard.state,
        attempt=shard.attempt,
        size=shard.size,
        benchmarks=shard.benchmarks,
        reason=shard.reason or _not_sent(shard),
        arrived_at=shard.arrived_at,
        cost_s=_seconds(shard.cost_ms),
        longest_s=_seconds(shard.longest_ms),
        upstream=sent is not None,
        upstream_run_id=sent.run_id if sent else None,
        upload_id=shard.upload_id,
        run_hash=sent.run_hash if sent else None,
    )


def _not_carried(outcome: Outcome) -> str:
    """Why a shard skipped at the close was not carried: no run kept its results, or no baseline."""
    if source := outcome.baseline:
        return (
            f"skipped, not carried: no run of {source.branch or 'the base branch'} up to baseline run "
            f"{source.run_id} still keeps results of it"
        )
    return outcome.note or "skipped at close: carried from the baseline run when the run is forwarded"


def jobs_not_in(snapshot: Snapshot) -> list[ShardEntry]:
    """A CodSpeed workflow's jobs whose uploads are not all in: one entry per job group short of its
    manifest (a runner's shard has a name only once it uploads: its runPartId) and its shards
    carried, expected while the run is open and missing once it has ended, so a job that crashed
    is never silently absent."""
    run = snapshot.run
    arrived = Counter(s.group for s in snapshot.arrived().values())
    arrived.update(run.outcome.carried_groups())  # skipped at close
    entries = []
    for group, manifest in sorted(run.groups.items()):
        if not group or (jobs := manifest.expected_count()) is None:
            continue  # the client's shards (the group "") are listed by name
        expected = jobs * max(1, run.variants_of(group))
        if (short := expected - arrived[group]) <= 0:
            continue
        waiting = run.state == OPEN
        entries.append(
            ShardEntry(  # shown short: the page's timeline has room for some 28 characters of it
                name=f"{JOB_ENTRY}{group}",
                display=f"{group}: {short} of {expected} {'to come' if waiting else 'never came'}",
                state="expected" if waiting else "missing",
                reason=f"job {group}: {short} of its {expected} upload{'s' * (expected != 1)} "
                f"{'not in yet' if waiting else 'did not arrive'}",
            )
        )
    return entries


CODSPEED_UPLOADS = "api.codspeed.io"  # the host of CodSpeed's own upload URL


def codspeed_page(upstream_url: str, run: RunRecord) -> str | None:
    """Where CodSpeed shows the project's runs, when the run goes to CodSpeed itself and lives on
    GitHub. A run's own page CodSpeed tells only a logged-in user (its API's ``run.url``, which
    the runner asks for local runs), not the upload token the aggregator forwards with."""
    if urlsplit(upstream_url).hostname != CODSPEED_UPLOADS or run.provider not in (None, "GITHUB"):
        return None
    return f"https://codspeed.io/{run.project}"


def _not_measured(snapshot: Snapshot, baseline: Snapshot | None) -> tuple[int, int]:
    """The benchmarks a run counts without measuring them: (carried, running). Carried: its carried
    shards', and while it is open its skipped shards' in the baseline; running: the baseline's of
    shards not in yet."""
    run = snapshot.run
    carried = run.outcome.carried_benchmarks()
    if baseline is None or run.state != OPEN:
        return carried, 0
    skipped, running = _pending(run, baseline.arrived(), snapshot.arrived())
    return carried + skipped, running


def _pending(run: RunRecord, measured: dict[str, ShardRecord], arrived: dict[str, ShardRecord]) -> tuple[int, int]:
    """The baseline's benchmarks of the shards an open run has not had yet: (those it skips, the rest)."""
    pending = {name: s.benchmarks or 0 for name, s in measured.items() if name not in arrived}
    skipped = {name for name in pending if split_shard_key(name)[0] in run.skipped}
    return sum(pending[n] for n in skipped), sum(n for name, n in pending.items() if name not in skipped)


def _run_fields(run: RunRecord) -> dict[str, Any]:
    """What a report says of the run itself."""
    return {
        "project": run.project,
        "run_id": run.run_id,
        "attempt": run.attempt.number,
        "commit": run.commit,
        "head_commit": run.head_commit,
        "ref": run.ref,
        "opened_at": run.created_at or None,
        "ci_url": run.ci_url,
        "state": run.state,
        "partial": run.state not in FINAL_STATES,
        "closing": closing_said(run.close.requested, run.close.awaiting) if run.state == OPEN else None,
        "version": run.rev,
        "expected": run.expected_count(),
        "upstream": run.forward.upstream,
    }


def build_report(
    snapshot: Snapshot,
    now: str,
    *,
    summary: ShardSummary | None = None,
    baseline: Snapshot | None = None,
    branch: str = "main",
    threshold: float = 0.05,
) -> Report:
    """The report of one consistent read: ``summary`` has its arrived shards' benchmarks summed up
    against ``baseline`` (the baseline run's read, of ``branch``), when there is one. Its links (the
    run page's, CodSpeed's) are the caller's to add."""
    run = snapshot.run
    outcome = run.outcome
    carried, running = _not_measured(snapshot, baseline)
    missing = outcome.missing_benchmarks_total
    counts, listed = combine(summary or ShardSummary(), carried, running, missing)
    shards = [*(shard_entry(snapshot, name) for name in shard_names(snapshot)), *jobs_not_in(snapshot)]
    return Report(
        **_run_fields(run),
        arrived=len(snapshot.arrived()),
        carried=sum(s.state == "carried" for s in shards),
        shards=shards,
        baseline=compared_with(run, baseline, branch),
        missing_benchmarks=list(outcome.missing_benchmarks),
        overlaps=list(outcome.overlaps),
        overlaps_total=outcome.overlaps_total,
        counts=counts,
        benchmarks=listed,
        threshold=threshold,
        generated_at=now,
    )
