"""The sticky pull-request comment: which pull request a run belongs to, the hidden marker that
finds its comment again, and a body within GitHub's limit whatever the run's size."""

import re

from codspeed_wire.report import Report, render_markdown

BODY_LIMIT = 65_536  # GitHub's: a longer comment body is refused (422)
_PULL = re.compile(r"^refs/pull/(\d+)/(?:merge|head)$")


def pull_request(ref: str | None) -> int | None:
    """The pull request a run's ref names (GitHub's ``refs/pull/N/merge``), or None."""
    found = _PULL.match(ref or "")
    return int(found.group(1)) if found else None


def marker(project: str, run_id: str) -> str:
    """A line GitHub renders as nothing: one comment per pull request and run, every attempt's."""
    return f"<!-- codspeed-aggregator {project} {run_id.split('~', 1)[0]} -->"


def comment_body(report: Report, limit: int = BODY_LIMIT) -> str:
    """The report's Markdown under its marker, its shard table cut (then folded away) until it
    fits: the summary and the worst changes always stay; every shard is on the run page."""
    head = marker(report.project, report.run_id) + "\n"
    rows = len(report.shards)
    while True:
        body = head + render_markdown(report, shard_rows=rows)
        if len(body) <= limit:
            return body
        if rows == 0:
            cut = "\n\n(cut to fit a GitHub comment: the whole report is on the run page)\n"
            return body[: limit - len(cut)] + cut
        rows //= 2
