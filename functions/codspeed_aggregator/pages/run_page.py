"""The run page and a project's list of runs: server-rendered HTML with inline SVG and a little
plain JavaScript (sorting, filtering and, while the run is open, refreshing its main part in
place). No framework, no build step, nothing fetched from elsewhere; without JavaScript the
same sorting and filtering are links and a form, answered by the server."""

from typing import Any
from urllib.parse import urlencode

from codspeed_rules.summary import counts_line, listed, plural, shards_done
from codspeed_wire.markdown import figure, overlaps_line
from codspeed_wire.report import FINAL_STATES, BenchmarkEntry, Report, ShardBenchmarks, UpstreamEntry

from ..domain.records import RunRecord
from .html import escape
from .timeline import critical_path, predicted, timeline

REFRESH_MS = 2000
PAGE_ROWS = 5000  # a shard's benchmarks one page shows: 40 000 made a 12 MB page, over Lambda's 6 MB answer
SORTS = {  # column -> key of the rows, in the order the column shows first
    "change": lambda b: (b.change is None, -(b.change or 0)),
    "name": lambda b: b.name,
    "shard": lambda b: (b.shard, b.name),
    "state": lambda b: (b.state, b.name),
    "value": lambda b: (b.value is None, -(b.value or 0)),
}
COLUMNS = (
    ("name", "Benchmark"),
    ("shard", "Shard"),
    ("state", "State"),
    ("value", "Value"),
    ("baseline", "Baseline"),
    ("change", "Change"),
)

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}
header,main,footer{max-width:1100px;margin:0 auto;padding:12px 20px}
h1{font-size:20px;margin:8px 0}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dt{color:#555}dd{margin:0;overflow-wrap:anywhere}.state{font-weight:600}table{border-collapse:collapse;width:100%;background:#fff}
th,td{padding:4px 8px;border-bottom:1px solid #e0e0e0;text-align:left;vertical-align:top}
th a{color:inherit}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.regression td{background:#ffebee}tr.improvement td{background:#e8f5e9}
.flag{font-weight:600}.regression .flag{color:#b71c1c}.improvement .flag{color:#1b5e20}
.controls{margin:10px 0}svg text{font-size:11px}.legend span{margin-right:12px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.scroll{overflow-x:auto;max-width:100%}#timeline{min-width:940px}
.verdict{font-size:16px;font-weight:600;padding:8px 12px;margin:0 0 10px;border-left:4px solid #757575;background:#fff}
.verdict.regression{border-color:#b71c1c;background:#ffebee}.verdict.improvement{border-color:#1b5e20;background:#e8f5e9}
@media (max-width:640px){header,main,footer{padding:8px 10px}#benchmarks td:first-child{overflow-wrap:anywhere}
#benchmarks th:nth-child(2),#benchmarks td:nth-child(2),#benchmarks th:nth-child(3),#benchmarks td:nth-child(3),
#benchmarks th:nth-child(5),#benchmarks td:nth-child(5){display:none}}
@media print{.controls,.live{display:none}body{background:#fff}tr.regression td,tr.improvement td{background:none}}
"""

SCRIPT = """
(function(){
  var sortKey = null;
  function rows(){ return Array.prototype.slice.call(document.querySelectorAll("#benchmarks tbody tr")); }
  function apply(){
    var body = document.querySelector("#benchmarks tbody"); if(!body) return;
    var list = rows();
    if(sortKey){
      list.sort(function(a,b){
        var x = a.dataset[sortKey] || "", y = b.dataset[sortKey] || "";
        var nx = parseFloat(x), ny = parseFloat(y);
        if(!isNaN(nx) || !isNaN(ny)){ if(isNaN(nx)) return 1; if(isNaN(ny)) return -1; return ny - nx; }
        return x < y ? -1 : x > y ? 1 : 0;
      });
      list.forEach(function(r){ body.appendChild(r); });
    }
  }
  function wire(){
    document.querySelectorAll("#benchmarks th a[data-sort]").forEach(function(a){
      a.addEventListener("click", function(e){ e.preventDefault(); sortKey = a.dataset.sort; apply(); });
    });
    var select = document.querySelector("#shard-filter");
    if(select){
      // a shard's benchmarks come from the server (a report names only the worst changes)
      select.addEventListener("change", function(){ select.form.submit(); });
      var button = document.querySelector("#shard-filter-go"); if(button) button.hidden = true;
    }
    apply();
  }
  function refresh(){
    var main = document.querySelector("main[data-refresh]");
    if(!main || main.dataset.final === "true") return;
    fetch(main.dataset.refresh, {credentials: "same-origin"}).then(function(r){
      if(!r.ok) throw new Error(r.status); return r.text();
    }).then(function(html){
      main.outerHTML = html; wire();
      var now = document.querySelector("main");
      if(now && now.dataset.final !== "true") setTimeout(refresh, %(ms)d);
    }).catch(function(){ setTimeout(refresh, %(ms)d * 2); });
  }
  wire();
  setTimeout(refresh, %(ms)d);
})();
""".replace("%(ms)d", str(REFRESH_MS))  # JavaScript's braces: no str.format


def _verdict(report: Report) -> str:
    """What a reviewer asks first, at the top: the changes against the baseline, or why there are none yet."""
    counts = report.counts
    if not counts.measured:
        return ""
    kind = "regression" if counts.regressions else "improvement" if counts.improvements else "clean"
    against = f" against run {escape(str(report.baseline['run_id']))}" if report.baseline else ", no baseline yet"
    partial = " so far" if report.partial else ""
    said = escape(counts_line(counts.model_dump()))
    return f'<p id="verdict" class="verdict {kind}" role="status">{said}{against}{partial}{_not_in(report)}</p>'


def _not_in(report: Report) -> str:
    """The shards the status fails for, by name, and the benchmarks two shards measured: the status's reasons."""
    shards = "".join(
        f"; shard{'s' * (len(named) > 1)} {state}: {listed(named, say=escape)}"
        for state in ("missing", "rejected")
        if (named := report.shown_in(state))
    )
    return shards + (f"; {report.overlaps_total} measured in two shards" if report.overlaps_total else "")


def _row(b: BenchmarkEntry, report: Report) -> str:
    change = "" if b.change is None else f"{b.change:+.1%}"
    flag = f' <span class="flag">{b.flag}</span>' if b.flag else ""
    where = f' title="{escape(b.source)}"' if b.source else ""
    data = (
        f'data-name="{escape(b.name)}" data-shard="{escape(b.shard)}" data-state="{b.state}" '
        f'data-value="{"" if b.value is None else b.value}" data-change="{"" if b.change is None else b.change}"'
    )
    shards = listed(report.shards_shown(b), say=escape)  # a benchmark two shards measured: both, as readers know them
    return (
        f'<tr class="{b.flag or b.state}" {data}><td>{escape(b.name)}</td><td>{shards}</td>'
        f'<td{where}>{b.state}</td><td class="num">{figure(b.value, b.unit)}</td>'
        f'<td class="num">{figure(b.baseline, b.unit)}</td><td class="num">{change}{flag}</td></tr>'
    )


def _table(report: Report, query: dict[str, Any], sort: str | None, shard: ShardBenchmarks | None) -> str:
    """The benchmarks: of one shard (all of them), or the run's worst changes, with the counts of all."""
    rows = list(shard.benchmarks if shard else report.benchmarks)
    if sort in SORTS:
        rows.sort(key=SORTS[sort])
    form = _shard_filter(report, query, shard.shard if shard else None)
    if shard:
        rows, caption = _paged(rows, query, f"benchmarks of shard {escape(shard.shard)}")
    elif report.counts.measured:
        caption = f"{escape(counts_line(report.counts.model_dump()))} (threshold {report.threshold:.0%})"
        if not rows:  # nothing to list: a sentence, not a table of headers
            said = f"{caption}: nothing changed past it; every benchmark is on its shard's page."
            return f'{form}<p id="benchmarks-said">{said}</p>'
        caption += "; the worst changes below, every benchmark shard by shard"
    elif report.counts.carried:
        carried = plural(report.counts.carried, "benchmark")
        return f'{form}<p id="benchmarks-said">{carried} carried from the baseline run, none measured in this run.</p>'
    else:
        return (
            "<p>No benchmark results yet.</p>" if not report.arrived else "<p>No benchmark results in its shards.</p>"
        )
    return (
        form + f'<div class="scroll"><table id="benchmarks"><caption>{caption}</caption>'
        f"<thead><tr>{_heads(query)}</tr></thead>"
        f"<tbody>{''.join(_row(b, report) for b in rows)}</tbody></table></div>"
    )


def _shard_filter(report: Report, query: dict[str, Any], chosen: str | None) -> str:
    """The form that shows one shard's benchmarks, the rest of the query kept (a signed link's too)."""
    options = "".join(  # the key is the query's (what the API reads); the reader sees the shard's name
        f'<option value="{escape(s.name)}"{" selected" if s.name == chosen else ""}>{escape(s.shown)}</option>'
        for s in report.shards
    )
    hidden = "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
        for k, v in query.items()
        if k not in ("shard", "format")
    )
    return (
        f'<form class="controls" method="get"><label>Shard <select id="shard-filter" name="shard">'
        f'<option value="">worst changes</option>{options}</select></label>{hidden} '
        f'<button id="shard-filter-go" type="submit">Show</button></form>'
    )


def _heads(query: dict[str, Any]) -> str:
    """The table's column heads, a sortable one a link that sorts by it."""
    heads = []
    for key, title in COLUMNS:
        if key in SORTS:
            href = "?" + urlencode({**{k: v for k, v in query.items() if k != "format"}, "sort": key})
            heads.append(f'<th scope="col"><a href="{escape(href)}" data-sort="{key}">{title}</a></th>')
        else:
            heads.append(f'<th scope="col">{title}</th>')
    return "".join(heads)


def _paged(rows: list[Any], query: dict[str, Any], what: str) -> tuple[list[Any], str]:
    """One page of ``rows`` (``?page=N``, PAGE_ROWS a page) and a caption that says which, with links
    to the pages before and after it that keep the rest of the query (a signed link's too)."""
    pages = max(1, -(-len(rows) // PAGE_ROWS))
    asked = query.get("page", "1")
    page = min(pages, max(1, int(asked))) if asked.isascii() and asked.isdigit() else 1
    if pages == 1:
        return rows, f"{len(rows)} {what}"
    first, shown = (page - 1) * PAGE_ROWS, rows[(page - 1) * PAGE_ROWS : page * PAGE_ROWS]
    links = []
    for label, to in (("previous", page - 1), ("next", page + 1)):
        if 1 <= to <= pages:
            href = "?" + urlencode({**{k: v for k, v in query.items() if k != "format"}, "page": str(to)})
            links.append(f'<a href="{escape(href)}" rel="{"prev" if label == "previous" else "next"}">{label} page</a>')
    return shown, (
        f"{len(rows)} {what}: {first + 1} to {first + len(shown)} shown (page {page} of {pages}) " + " · ".join(links)
    )


def render_main(
    report: Report,
    query: dict[str, Any],
    refresh_url: str | None,
    list_url: str | None,
    shard: ShardBenchmarks | None = None,
) -> str:
    """The part of the page that changes while the run is open (the live refresh swaps it)."""
    final = report.state in FINAL_STATES
    facts = _facts(report, list_url)
    live = "" if final else '<p class="live" role="status">Updating while the run is open…</p>'
    refresh = f' data-refresh="{escape(refresh_url)}"' if refresh_url else ""
    return (
        f'<main id="run" data-final="{"true" if final else "false"}" data-version="{report.version}"{refresh}>'
        f"{_verdict(report)}<dl>{''.join(f'<dt>{k}</dt><dd>{v}</dd>' for k, v in facts)}</dl>{live}"
        f"<h2>Shards</h2>{timeline(report)}{critical_path(report)}{predicted(report)}<h2>Benchmarks</h2>"
        f"{_table(report, query, query.get('sort'), shard)}</main>"
    )


def _facts(report: Report, list_url: str | None) -> list[tuple[str, str]]:
    """The run's facts, each (term, HTML), those it has only sometimes when it has them."""
    facts = [
        ("Project", escape(report.project)),
        ("Run", escape(report.run_id)),
        ("State", f'<span class="state" id="run-state">{escape(report.state)}</span>'),
        ("Close", f'<span id="closing">{escape(report.closing)}</span>' if report.closing else None),
        ("Shards", shards_done(report.arrived, report.carried, "?" if report.expected is None else report.expected)),
        *_what_it_measured(report),
        ("Upstream", _upstream_fact(report.upstream) if report.upstream else None),
        ("CI", f'<a href="{escape(report.ci_url)}">CI run</a>' if report.ci_url else None),
        (
            "CodSpeed",
            f'<a href="{escape(report.codspeed_url)}">the project\'s runs</a>' if report.codspeed_url else None,
        ),
        (
            "Runs",
            f'<a id="run-list" href="{escape(list_url)}">all runs of {escape(report.project)}</a>'
            if list_url
            else None,
        ),
    ]
    return [(term, html) for term, html in facts if html is not None]


def _what_it_measured(report: Report) -> list[tuple[str, str | None]]:
    """The attempt, the commit and ref it measured, what it compares with, what it measured twice."""
    commit = report.head_commit or report.commit
    overlaps = escape(overlaps_line(report, str)) if report.overlaps_total else None
    return [
        ("Attempt", str(report.attempt) if report.attempt > 1 else None),
        ("Commit", escape(commit[:12]) if commit else None),
        ("Ref", escape(report.ref) if report.ref else None),
        ("Baseline", _baseline_fact(report.baseline) if report.baseline else None),
        ("Overlaps", f'<span id="overlaps">{overlaps}</span>' if overlaps else None),
    ]


def _baseline_fact(baseline: dict[str, Any]) -> str:
    why = baseline.get("why")
    return f"run {escape(str(baseline.get('run_id')))} (commit {escape((baseline.get('commit') or '?')[:12])})" + (
        f": {escape(why)}" if why else ""
    )


def _upstream_fact(up: UpstreamEntry) -> str:
    return escape(
        f"{up.status}" + (f": {up.message}" if up.message else "") + (f" (run {up.run_id})" if up.run_id else "")
    )


def _document(title: str, body: str, script: bool) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width,initial-scale=1"><meta name="robots" content="noindex">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>{body}"
        f"{f'<script>{SCRIPT}</script>' if script else ''}</body></html>"
    )


def render_run(
    report: Report,
    query: dict[str, Any],
    refresh_url: str | None,
    list_url: str | None,
    shard: ShardBenchmarks | None = None,
) -> str:
    header = f"<header><h1>CodSpeed shards: {escape(report.project)} · run {escape(report.run_id)}</h1></header>"
    footer = f"<footer>Report version {report.version} · generated {escape(report.generated_at)}</footer>"
    return _document(
        f"{report.project} run {report.run_id}: {report.state}",
        header + render_main(report, query, refresh_url, list_url, shard) + footer,
        script=True,
    )


def _linked(text: str, link: str | None) -> str:
    return f'<a href="{escape(link)}">{escape(text)}</a>' if link else escape(text)


def render_list(project: str, runs: list[tuple[RunRecord, str | None]]) -> str:
    """A project's runs, newest first; each links to its page (``runs``: (RunRecord, link))."""
    rows = "".join(
        f"<tr><td>{_linked(run.run_id, link)}</td><td>{escape(run.state)}</td>"
        f"<td>{escape((run.commit or '')[:12])}</td>"
        f"<td>{escape(run.ref or '')}</td><td>{escape(run.created_at)}</td></tr>"
        for run, link in runs
    )
    body = (
        f'<header><h1>CodSpeed shards: {escape(project)}</h1></header><main><table id="runs">'
        f'<caption>{len(runs)} latest runs</caption><thead><tr><th scope="col">Run</th><th scope="col">State</th>'
        f'<th scope="col">Commit</th><th scope="col">Ref</th><th scope="col">Opened</th></tr></thead>'
        f"<tbody>{rows}</tbody></table></main>"
    )
    return _document(f"{project}: runs", body, script=False)
