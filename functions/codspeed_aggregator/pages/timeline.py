"""The run page's shard section: one strip per shard on a time axis from the run's opening, which
shard the run waited for, and what the recorded costs predict for a balanced split."""

from datetime import datetime

from codspeed_rules.names import Shown
from codspeed_rules.summary import shown_state
from codspeed_wire.report import Report, ShardEntry

from .html import escape

COLOURS = {
    "arrived": "#2e7d32",
    "expected": "#1565c0",
    "carried": "#6a1b9a",
    "skipped": "#757575",
    "missing": "#c62828",
    "rejected": "#ef6c00",
    "late": "#f9a825",
}


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


# Steps of the time axis, in seconds: at most five ticks, each a whole number of seconds, none twice
TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 150, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


WIDTH, LABEL, ROW = 760, 180, 18  # the chart's bars, its shards' names, one shard's strip
LABEL_CHARACTERS = 28  # what LABEL's 180 pixels hold of a name


def timeline(report: Report) -> str:
    """One strip per shard, from the run's opening to its arrival (or to now while it is out)."""
    start, now = _epoch(report.opened_at), _epoch(report.generated_at)
    shards = report.shards
    if start is None or now is None or not shards:
        return ""
    span = max(now - start, 1.0)
    height = ROW * len(shards) + 40
    out = [
        f'<svg id="timeline" role="img" aria-labelledby="timeline-title" width="100%" '
        f'viewBox="0 0 {WIDTH + LABEL} {height}" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="timeline-title">Shard timeline: {len(shards)} shards from the run\'s opening '
        f"to {'its end' if report.final else 'now'}</title>",
        *(_strip(shard, 4 + i * ROW, start, now, span) for i, shard in enumerate(shards)),
        *_axis(height - 20, span),
        "</svg>",
    ]
    return f'<div class="scroll">{"".join(out)}</div><p class="legend">{_legend(shards)}</p>'


def _strip(shard: ShardEntry, y: int, start: float, now: float, span: float) -> str:
    """A shard's strip: a bar from the opening to its arrival (to now while it runs), or a mark for
    one that never ran in this run (carried, skipped, missing)."""
    arrived = _epoch(shard.arrived_at)
    running = shard.state == "expected"
    colour = COLOURS.get(shard.state, "#9e9e9e")
    state = "running" if running else shard.state + (", upstream" if shard.upstream else "")
    when = f", arrived {shard.arrived_at} ({_duration(arrived - start)} after the opening)" if arrived else ""
    name = escape(shard.label or shard.name)  # the raw runPartId, in the tooltip
    if (end := now if running else arrived) is not None:
        length = max(2.0, (end - start) / span * WIDTH)
        faded = ' opacity="0.55"' if running else ""
        bar = (
            f'<rect x="{LABEL}" y="{y}" width="{length:.1f}" height="{ROW - 5}" fill="{colour}"'
            f"{faded}><title>{name}: {state}{escape(when)}</title></rect>"
        )
    else:  # a mark, not a bar that spans the run
        bar = (
            f'<rect x="{LABEL}" y="{y}" width="{ROW - 5}" height="{ROW - 5}" fill="none" stroke="{colour}" '
            f'stroke-width="2"><title>{name}: {state}</title></rect>'
            f'<text x="{LABEL + ROW + 2}" y="{y + 12}" fill="{colour}">{state}</text>'
        )
    return (
        f'<g role="listitem" aria-label="shard {name}: {state}{escape(when)}">'
        f'<text x="0" y="{y + 12}">{escape(fitted(shard.shown))}</text>{bar}</g>'
    )


def fitted(label: str, room: int = LABEL_CHARACTERS) -> str:
    """A shard's label in the room a row has: whole when it fits, else its start and its end around an
    ellipsis, the end kept longer (what tells a matrix's jobs apart: ``[shard 3, job 3/3]``). Cut at its
    start alone, three jobs of a step read alike."""
    if len(label) <= room:
        return label
    head = (room - 1) // 3
    return label[:head] + "…" + label[-(room - 1 - head) :]


def _axis(axis: int, span: float) -> list[str]:
    """A time axis from the opening: at most five ticks, each labelled with its own time."""
    out = [f'<line x1="{LABEL}" y1="{axis}" x2="{LABEL + WIDTH}" y2="{axis}" stroke="#9e9e9e"/>']
    step = next((s for s in TICK_STEPS if s >= span / 4), span / 4)
    for tick in range(int(span / step + 1e-9) + 1):
        x = LABEL + tick * step / span * WIDTH
        anchor = "start" if tick == 0 else "end" if x >= LABEL + WIDTH - 1 else "middle"
        out.append(
            f'<line x1="{x:.1f}" y1="{axis}" x2="{x:.1f}" y2="{axis + 4}" stroke="#9e9e9e"/>'
            f'<text class="tick" x="{x:.1f}" y="{axis + 16}" text-anchor="{anchor}">'
            f"{'opened' if tick == 0 else '+' + _duration(tick * step)}</text>"
        )
    return out


def _legend(shards: list[ShardEntry]) -> str:
    return "".join(
        f'<span><i class="swatch" style="background:{c}{";opacity:0.55" if s == "expected" else ""}">'
        f"</i>{shown_state(s)}</span>"
        for s, c in COLOURS.items()
        if any(x.state == s for x in shards)
    )


def critical_path(report: Report) -> str:
    """Which shard the run waited for: the last to arrive, and by how much it trailed the one before."""
    start = _epoch(report.opened_at)
    arrived = sorted((at, s.shown) for s in report.shards if (at := _epoch(s.arrived_at)) is not None)
    if start is None or not arrived:
        return ""
    last_at, last = arrived[-1]
    trailing = _trailing(arrived)
    running = sum(1 for s in report.shards if s.state == "expected") if report.state == "open" else 0
    if running:  # the run still waits: the last arrival is no critical path yet
        return (
            f'<p id="critical-path">So far shard {escape(last)} arrived last, {_duration(last_at - start)} after '
            f"the opening{trailing}; {running} shard{'s' * (running > 1)} still running.</p>"
        )
    return (
        f'<p id="critical-path">Critical path: shard {escape(last)} arrived last, '
        f"{_duration(last_at - start)} after the opening{trailing}.</p>"
    )


def _trailing(arrived: list[tuple[float, Shown]]) -> str:
    """By how much the last shard to arrive trailed the one before it (``arrived``: by arrival)."""
    if len(arrived) < 2:
        return ""
    (last_at, _), (before_at, before) = arrived[-1], arrived[-2]
    return f", {_duration(last_at - before_at)} after shard {escape(before)}, the one before it"


def predicted(report: Report) -> str:
    """What the recorded costs predict for the longest shard with the run's benchmarks balanced over
    as many shards (no shorter than the total over the shards, nor than the costliest benchmark),
    against the longest here. Said once the run is over: while it is open, the shards in so far are
    not the run's, and a cost of 0 is one not recorded (a shard measured nothing)."""
    costed = [(s, cost) for s in report.shards if (cost := s.cost_s)]
    if report.state == "open" or len(costed) < 2:
        return ""
    total = sum(cost for _, cost in costed)
    balanced = max(total / len(costed), max(s.longest_s or 0.0 for s, _ in costed))
    longest, longest_cost = max(costed, key=lambda shard_cost: shard_cost[1])
    return (
        f'<p id="predicted">Recorded costs: {_cost(total)} of benchmarks in {len(costed)} shards; balanced on '
        f"them (<code>codspeed-client split --shards {len(costed)}</code>), the longest shard would run about "
        f"{_cost(balanced)}, against {_cost(longest_cost)} for shard "
        f"{escape(longest.shown)} here.</p>"
    )


def _cost(seconds: float) -> str:
    if seconds < 1:  # a valgrind run's few million instructions: milliseconds, never "0.0s"
        return f"{seconds * 1000:.3g}ms"
    return f"{seconds:.1f}s" if seconds < 60 else _duration(seconds)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
