"""The run report in Markdown (a pull-request comment, a CI step summary, ``?format=markdown``):
what a reviewer reads first, every text from a bundle or a request made inert."""

import unicodedata
from collections.abc import Callable

from codspeed_rules.summary import counts_line, listed, overlaps_named, shards_done, shown_state

from .report import Report, ShardEntry


def visible(text: str) -> str:
    """Text with its invisible controls written out (``U+202E``): a right-to-left override or a
    zero-width character from a bundle could otherwise reorder or hide what a reviewer reads."""
    return "".join(f"U+{ord(c):04X}" if unicodedata.category(c) in ("Cf", "Cc") else c for c in text)


_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "&#64;", "|": "&#124;", "`": "&#96;"}
_PUNCTUATION = "\\*_{}[]()#+!~:"


def md(text: object) -> str:
    """Text from a bundle or a request, made inert in Markdown: no table cell broken by '|', no
    @mention, no link, image, HTML or emphasis; one line."""
    out = []
    for char in visible(" ".join(str(text).split())):
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif char in _PUNCTUATION:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _size(n: int | None) -> str:
    if n is None:
        return ""
    size: float = n
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


OPEN_SHARD_LIST = 10  # longer shard lists are folded
MAX_FLAGGED = 30  # benchmarks listed in Markdown; the page lists them all


def figure(value: float | None, unit: str | None) -> str:
    """A benchmark's figure for people: cycles with thousands separators, times in their unit."""
    if value is None:
        return ""
    if unit == "ns":
        for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
            if value >= scale:
                return f"{value / scale:.2f} {name}"
        return f"{value:.0f} ns"
    return f"{value:,.0f} {unit or ''}".strip()


NAMED_SHARDS = 20  # shards named per state (missing, skipped, ...); the table and the page have them all


def verdict(report: Report) -> str:
    """What a reviewer asks first, in one line: the regressions and the worst of them, else that
    nothing changed past the threshold, saying so while shards are still to come (a carried shard
    counts as in)."""
    line = _changes_said(report) + _shards_said(report)
    return line[0].upper() + line[1:]


def _changes_said(report: Report) -> str:
    """The regressions past the threshold and the worst of them, or that there is none."""
    counts, past = report.counts, f"past {report.threshold:.0%}"
    if counts.regressions:
        return _regressions_said(report, past)
    if counts.measured:
        improved = counts.improvements
        return (
            f"no regression {past}, {improved} improvement{'s' * (improved > 1)}" if improved else f"no change {past}"
        )
    return "no benchmark measured yet" if report.partial else "no benchmark measured"


def _regressions_said(report: Report, past: str) -> str:
    counts = report.counts
    worst = max((b for b in report.benchmarks if b.flag == "regression"), key=lambda b: b.change or 0, default=None)
    line = f"{counts.regressions} regression{'s' * (counts.regressions > 1)} {past}"
    change = counts.worst_regression if counts.worst_regression is not None else worst.change if worst else None
    if change is not None:
        line += f", worst {change:+.1%}" + (f" ({md(worst.name)})" if worst is not None else "")
    return line


def _shards_said(report: Report) -> str:
    """How many shards are in while the run is open, or once it has ended every other reason its status
    gives (``_ended_said``)."""
    expected = "?" if report.expected is None else str(report.expected)
    if report.partial:
        shown = sum(1 for s in report.shards if s.state in ("arrived", "carried"))
        return f"{' so far' if report.counts.measured else ''}: {shown} of {expected} shards in"
    return _ended_said(report, expected)


def _ended_said(report: Report, expected: str) -> str:
    """Shards that never came, shards refused, benchmarks two shards measured: each reason the status gives."""
    missing = sum(1 for s in report.shards if s.state == "missing")
    rejected = sum(1 for s in report.shards if s.state == "rejected")
    twice = report.overlaps_total
    return "".join(
        [
            f"; {missing} of {expected} shard{'s' * (expected != '1')} missing" if missing else "",
            f"; {rejected} shard{'s' * (rejected > 1)} rejected" if rejected else "",
            f"; {twice} benchmark{'s' * (twice > 1)} measured in two shards" if twice else "",
        ]
    )


def render_markdown(report: Report, shard_rows: int | None = None) -> str:
    """The report for a pull request comment or a job summary: the verdict first, then the run
    and what changed, the shard table folded when long (and cut to ``shard_rows``: a comment has
    a limit), internal counters out of the way."""
    sections = (
        _md_heading(report),
        _md_named_shards(report),
        _md_baseline(report),
        _md_flagged(report),
        _md_links(report),
        _md_shard_table(report, shard_rows),
        _md_details(report),
    )
    return "\n".join(line for section in sections for line in section) + "\n"


def _md_heading(report: Report) -> list[str]:
    """The verdict, the title, and where the run is (its commit, CI run, CodSpeed)."""
    expected = "?" if report.expected is None else str(report.expected)
    attempt = f" (attempt {report.attempt})" if report.attempt > 1 else ""
    title = (
        f"CodSpeed shards for {md(report.project)} run {md(report.run_id)}{attempt}: {report.state}, "
        + shards_done(report.arrived, report.carried, expected)
    )
    if report.closing:
        title += f" ({md(report.closing)})"
    elif report.partial:
        title += " (partial report: more shards may still arrive)"
    lines = [f"**{verdict(report)}**", "", title, ""]
    shown = report.head_commit or report.commit
    where = [f"commit {md(shown[:12])}"] if shown else []
    if report.ci_url:
        where.append(f"[CI run]({report.ci_url})")
    if report.codspeed_url:
        where.append(f"[CodSpeed]({report.codspeed_url})")
    if where:
        line = " · ".join(where)
        lines += [line[0].upper() + line[1:], ""]
    return lines


def _md_named_shards(report: Report) -> list[str]:
    """The shards not measured here, by state: names, not a count ("Skipped: 3" would read as three shards)."""
    lines = []
    for state in ("missing", "skipped", "carried", "rejected", "late"):
        if names := report.shown_in(state):
            lines += [
                f"{state.capitalize()} shard{'s' if len(names) > 1 else ''}: {listed(names, NAMED_SHARDS, md)}",
                "",
            ]
    return lines


def overlaps_line(report: Report, say: Callable[[str], str]) -> str:
    """The benchmarks measured twice, in a sentence (``say``: made inert for where it is shown)."""
    named = overlaps_named([o.model_dump() for o in report.overlaps], report.overlaps_total, say)
    return (
        f"Measured in more than one shard {named}. Each went upstream from every shard that holds it: "
        "a shard's filter overlaps another's."
    )


def _md_baseline(report: Report) -> list[str]:
    """The baseline compared with, the benchmarks gone since it, and the counts."""
    lines = []
    if b := report.baseline:
        branch = f" on {md(b['branch'])}" if b.get("branch") else ""
        why = f": {md(b['why'])}" if b.get("why") else ""
        lines += [f"Baseline: run {md(b['run_id'])}{branch} (commit {md((b.get('commit') or '?')[:12])}){why}", ""]
    if report.missing_benchmarks:
        lines += [
            f"Benchmarks gone since the baseline ({len(report.missing_benchmarks)}): "
            + ", ".join(md(name) for name in report.missing_benchmarks[:20]),
            "",
        ]
    if report.overlaps_total:
        lines += [overlaps_line(report, md), ""]
    if report.counts.measured:
        lines += [f"Benchmarks: {counts_line(report.counts.model_dump())} (threshold {report.threshold:.0%})", ""]
    return lines


def _md_flagged(report: Report) -> list[str]:
    """The regressions, then the improvements, ``MAX_FLAGGED`` of them in all: the reviewer's first question first."""
    lines, room = [], MAX_FLAGGED
    for flag, heading, total in (
        ("regression", "Regressions", report.counts.regressions),
        ("improvement", "Improvements", report.counts.improvements),
    ):
        flagged = [b for b in report.benchmarks if b.flag == flag][:room]
        if not flagged:
            continue
        room -= len(flagged)
        worst = f" (the worst {len(flagged)} of {total}; every benchmark is on the run page):"
        lines += [
            f"{heading} past {report.threshold:.0%} against the baseline" + (worst if len(flagged) < total else ":"),
            "",
            "| benchmark | shard | change | value | baseline |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {md(b.name)} | {listed(report.shards_shown(b), say=md)} | {b.change:+.1%} | "
            f"{figure(b.value, b.unit)} | "
            f"{figure(b.baseline, b.unit)} |"
            for b in flagged
        ]
        lines.append("")
    return lines


def _md_links(report: Report) -> list[str]:
    lines = [f"[Run page]({report.page_url})", ""] if report.page_url else []
    if u := report.upstream:
        lines += [f"Upstream: {u.status} at {u.at}" + (f": {md(u.message)}" if u.message else ""), ""]
        # a tokenless run's uploads, as the runner prints them for a fork's: what finds the run on CodSpeed
        lines += [f"CodSpeed Run Hash: `{md(h)}`" for h in u.run_hashes] + ([""] if u.run_hashes else [])
    return lines


def _md_shard_table(report: Report, shard_rows: int | None) -> list[str]:
    """Every shard (``shard_rows`` at most), folded when there are many."""
    opened = " open" if len(report.shards) <= OPEN_SHARD_LIST else ""
    lines = [
        f"<details{opened}><summary>{len(report.shards)} shard{'' if len(report.shards) == 1 else 's'}</summary>",
        "",
        "| shard | state | uploads | benchmarks | size | arrived at | note |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = report.shards if shard_rows is None else report.shards[:shard_rows]
    lines += map(_md_shard_row, rows)
    if len(rows) < len(report.shards):
        lines.append(f"| … | {len(report.shards) - len(rows)} more shards on the run page | | | | | |")
    return [*lines, "", "</details>", ""]


def _md_shard_row(s: ShardEntry) -> str:
    bench = "" if s.benchmarks is None else str(s.benchmarks)
    state = shown_state(s.state) + (", upstream" if s.upstream else "")
    return (
        f"| {md(s.shown)} | {state} | {s.attempt or ''} | {bench} | "
        f"{_size(s.size)} | {s.arrived_at or ''} "
        f"| {md(s.reason or '')} |"
    )


def _md_details(report: Report) -> list[str]:
    """The internal counters, out of the way."""
    return [
        "<details><summary>Details</summary>",
        "",
        f"Report version {report.version} · generated {report.generated_at}"
        + (f" · commit {md(report.commit)}" if report.commit else "")
        + (f" (merging head {md(report.head_commit)})" if report.head_commit else "")
        + (f" · upstream run {md(report.upstream.run_id)}" if report.upstream and report.upstream.run_id else "")
        + (f" (the first of {report.upstream.run_ids})" if report.upstream and report.upstream.run_ids else ""),
        "",
        "</details>",
    ]
