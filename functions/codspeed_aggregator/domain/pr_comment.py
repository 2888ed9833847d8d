"""The sticky pull-request comment: the hidden marker that finds it again, and a body within
its host's limit whatever the run's size."""

from codspeed_wire.report import Report, render_markdown

from .ledger import base_run_id

BODY_LIMIT = 65_536  # GitHub's: a longer comment body is refused (422)


def marker(project: str, run_id: str) -> str:
    """A line GitHub renders as nothing: one comment per pull request and run, every attempt's."""
    return f"<!-- codspeed-aggregator {project} {base_run_id(run_id)} -->"


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
            cut = "\n\n(cut to fit a comment: the whole report is on the run page)\n"
            return body[: limit - len(cut)] + cut
        rows //= 2
