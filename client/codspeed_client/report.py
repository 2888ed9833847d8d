"""Show a run's report, and wait for it to be final."""

from __future__ import annotations

import time

from codspeed_rules.names import Shown
from codspeed_rules.summary import (
    counts_line,
    listed,
    overlaps_named,
    plural,
    shards_done,
    shown_state,
    uploads_said,
)

from .errors import FORWARD_FAILED, OK, OVERLAPPED, REGRESSED, SHARDS_MISSING, TIMEOUT

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from collections.abc import Callable

    from codspeed_rules.report_json import BenchmarkJson, ReportJson, ShardJson, UpstreamJson

    from .api import AggregatorApi

FINAL = ("forwarded", "forward_failed", "closed_empty")
NAMED = 10  # shards a failing exit's sentence names; it counts the rest


def wait_for_final(
    read: Callable[[], ReportJson | None],
    timeout: float,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[ReportJson | None, bool]:
    """Poll ``read`` (the run's report; None: no such run) until the run is final, for ``timeout``
    seconds exactly (the last poll at the end); a run that does not exist yet (no shard has asked to
    upload) is waited for."""
    deadline = clock() + timeout
    while True:
        report = read()
        if report is not None and report["state"] in FINAL:
            return report, False
        left = deadline - clock()
        if left <= 0:
            return report, True
        sleep(min(interval, left))


def every_benchmark(api: AggregatorApi, report: ReportJson) -> list[BenchmarkJson]:
    """Every benchmark of a run, shard after shard: a report names only the worst changes."""
    return [
        b
        for s in report["shards"]
        for b in api.shard_benchmarks(report["project"], report["run_id"], s["name"])["benchmarks"]
    ]


def regressions_past(api: AggregatorApi, report: ReportJson, threshold: float | str) -> str | None:
    """What regressed past ``threshold`` (a fraction, or "report": the report's own), in one
    sentence; None when nothing did. Another threshold than the report's reads every shard's page."""
    own = report.get("threshold", 0.05)
    limit = float(own if threshold == "report" else threshold)
    past, count = _flagged(report) if limit == own else _past(every_benchmark(api, report), limit)
    if not past:
        return None
    worst = max(past, key=lambda b: b.get("change") or 0.0)
    return (
        f"{plural(count, 'benchmark')} regressed past {limit:.0%} against the baseline: "
        f"worst {worst['name']} {worst['change']:+.1%}"
    )


def _flagged(report: ReportJson) -> tuple[list[BenchmarkJson], int]:
    """The regressions the report flags, and how many it counts (it lists the worst only)."""
    past = [b for b in report.get("benchmarks") or [] if b.get("flag") == "regression"]
    counts = report.get("counts")
    return past, counts.get("regressions", len(past)) if counts else len(past)


def _past(benchmarks: list[BenchmarkJson], limit: float) -> tuple[list[BenchmarkJson], int]:
    """The benchmarks that changed past ``limit``, and how many (one two shards measured, an overlap: once)."""
    past = [b for b in benchmarks if (change := b.get("change")) is not None and change > limit]
    return past, len({(b["name"], b.get("unit")) for b in past})


def final_exit_code(report: ReportJson, timed_out: bool, allow_overlaps: bool = False) -> int:
    if timed_out:
        return TIMEOUT
    if report["state"] == "forward_failed":
        return FORWARD_FAILED
    if report["state"] == "closed_empty" or any(s["state"] in ("missing", "rejected") for s in report["shards"]):
        return SHARDS_MISSING  # a shard whose bundle was refused is one whose benchmarks never came
    if report.get("overlaps_total") and not allow_overlaps:
        return OVERLAPPED
    return OK


def exit_sentences(
    report: ReportJson | None, code: int, regressed: str | None, timed_out: bool, allow_overlaps: bool
) -> list[str]:
    """Why the gate fails (exit ``code``), in a sentence, then each other reason that applies too:
    12, then 10, 11, 14 and 13 is the precedence of the exit code. Nothing when nothing fails."""
    if report is None or not code:
        return []
    said = {
        TIMEOUT: _waiting_said(report) if timed_out else None,
        FORWARD_FAILED: _forward_failed_said(report),
        SHARDS_MISSING: _missing_said(report),
        OVERLAPPED: None if allow_overlaps else _overlaps_said(report),
        REGRESSED: regressed,
    }
    why = {other: reason for other, reason in said.items() if reason}
    first = [f"exit {code}: {why[code]}"] if code in why else []
    return first + [f"also: {reason}" for other, reason in why.items() if other != code]


def _waiting_said(report: ReportJson) -> str:
    return f"the run is not final yet ({report.get('closing') or 'it is ' + report['state']})"


def _forward_failed_said(report: ReportJson) -> str | None:
    if report["state"] != "forward_failed":
        return None
    upstream = report.get("upstream")
    return f"the forward upstream failed: {(upstream.get('message') if upstream else None) or '?'}"


def _overlaps_said(report: ReportJson) -> str | None:
    overlapped = overlaps_text(report)
    return f"benchmarks {overlapped} (--allow-overlaps takes them)" if overlapped else None


def _missing_said(report: ReportJson) -> str | None:
    """The shards a run's gate misses (the first 10 named), those whose bundle was refused (with why), or
    that it was closed with none."""
    said = [
        f"{plural(len(named), 'shard')} {what}: {listed(named, NAMED)}"
        for state, what in (("missing", "missing, never came"), ("rejected", "rejected, their bundle refused"))
        if (named := [_named(s) for s in report["shards"] if s["state"] == state])
    ]
    if said:
        return "; ".join(said)
    return "the run was closed with no shard in it" if report["state"] == "closed_empty" else None


def shown(shard: ShardJson) -> Shown:
    """A report's shard as its readers know it (the report's ``ShardEntry.shown``): its readable label,
    else its label, else its name."""
    return Shown(shard.get("display") or shard.get("label") or shard["name"])


def _named(shard: ShardJson) -> Shown:
    """A shard as its readers know it, with why its bundle was refused."""
    name = shown(shard)
    return Shown(f"{name} ({shard['reason']})") if shard["state"] == "rejected" and shard.get("reason") else name


def overlaps_text(report: ReportJson) -> str | None:
    """The benchmarks measured in more than one shard by one executor, in a sentence."""
    if not report.get("overlaps_total"):
        return None
    overlaps = report.get("overlaps") or []
    return f"measured in more than one shard {overlaps_named(overlaps, report.get('overlaps_total', len(overlaps)))}"


def _shard_detail(shard: ShardJson) -> str:
    detail = [shown_state(shard["state"])]
    if (benchmarks := shard.get("benchmarks")) is not None:
        detail.append(plural(benchmarks, "benchmark"))
    if (uploads := shard.get("attempt", 0)) > 1:  # its uploads in this attempt of the run: the run's is the header's
        detail.append(uploads_said(uploads))
    if reason := shard.get("reason"):
        detail.append(reason)
    if shard.get("run_hash"):  # the bytes CodSpeed received: where they are not the job's, not the runner's hash
        detail.append(f"CodSpeed Run Hash {shard['run_hash']}")
    return ", ".join(detail)


def render_text(report: ReportJson, every: bool = False) -> str:
    """The report for people; with ``every``, one line per benchmark (``report["benchmarks"]``
    holds all of them: ``every_benchmark``)."""
    lines = [_headline(report)]
    lines += [f"  {shown(s)}: " + _shard_detail(s) for s in report["shards"]]
    lines += _outcome_lines(report)
    if every:
        shard_of = {s["name"]: shown(s) for s in report["shards"]}  # a benchmark's shard, as its readers know it
        lines += [
            f"  {b['name']} ({shard_of.get(b['shard'], b['shard'])}): {b['state']}"
            + (f", {b['change']:+.1%}" if b.get("change") is not None else "")
            for b in report["benchmarks"]
        ]
    if report.get("page_url"):
        lines.append(f"page: {report['page_url']}")
    return "\n".join(lines) + "\n"


def _headline(report: ReportJson) -> str:
    """``run R of P, attempt N: state, 3/5 shards in (what it is doing)``."""
    expected = "?" if report.get("expected") is None else report["expected"]
    if report["state"] == "finalizing":
        doing = " (finalizing: what is not upstream yet goes now)"
    elif report.get("closing"):
        doing = f" ({report['closing']})"
    else:
        doing = " (partial: more shards may come)" if report["partial"] else ""
    attempt = f", attempt {report['attempt']}" if report.get("attempt", 1) > 1 else ""
    done = shards_done(report["arrived"], report.get("carried") or 0, expected)
    return f"run {report['run_id']} of {report['project']}{attempt}: {report['state']}, {done}{doing}"


def _outcome_lines(report: ReportJson) -> list[str]:
    """Where the run went upstream, its benchmarks' counts, its overlaps and its worst changes."""
    lines = [_upstream_line(upstream)] if (upstream := report.get("upstream")) else []
    counts = report.get("counts") or {}
    if counts.get("measured"):
        lines.append(f"benchmarks: {counts_line(counts)} (threshold {report.get('threshold', 0.05):.0%})")
    if overlapped := overlaps_text(report):
        lines.append(overlapped)
    if flagged := [b for b in report.get("benchmarks") or [] if b.get("flag")]:
        lines.append("worst: " + ", ".join(f"{b['name']} {b['change']:+.1%}" for b in flagged[:10]))
    return lines


def _upstream_line(upstream: UpstreamJson) -> str:
    why = f": {upstream['message']}" if upstream.get("message") else ""
    runs = f", the first of {upstream['run_ids']}" if upstream.get("run_ids") else ""
    hashes = "".join(f"\n  CodSpeed Run Hash {h}" for h in upstream.get("run_hashes") or [])  # a tokenless run's
    return (
        f"upstream: {upstream['status']} (run {upstream.get('run_id') or '-'}{runs}) at {upstream['at']}{why}{hashes}"
    )
