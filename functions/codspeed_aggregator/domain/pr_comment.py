"""The sticky pull-request comment: one per pull request (a GitLab merge request's note), edited
in place across every push, workflow run and attempt; which run it shows; its hidden marker; a
body within its host's limit whatever the run's size."""

from dataclasses import dataclass
from typing import Any

from codspeed_wire.markdown import render_markdown
from codspeed_wire.report import Report

from .attempts import base_run_id
from .timestamps import epoch

BODY_LIMIT = 65_536  # GitHub's: a longer comment body is refused (422)


@dataclass(frozen=True)
class PullRequestRef:
    """A pull request (a GitLab merge request) on its host: what its one comment is keyed by. Two
    hosts may hold a project of the same path, and their numbers meet."""

    host: str  # the run's repositoryProvider: GITHUB, GITLAB
    project: str
    number: int


def marker(project: str, number: int) -> str:
    """A line GitHub renders as nothing: one comment per pull request, whatever its runs."""
    return f"<!-- codspeed-aggregator {project} #{number} -->"


@dataclass(frozen=True)
class Shown:
    """What one edit of the comment shows: a run (every attempt of it), its place among the pull
    request's runs (when it was opened: a later push's run is newer), and its report's version.
    A report shows in the comment only over an older run's, or an earlier version of its own."""

    run: str
    opened: int
    version: int
    commit: str | None
    url: str | None

    @classmethod
    def of(cls, report: Report, runs: dict[str, Any], now: float) -> "Shown":
        """``runs``: the pull request's runs the comment has shown (a later attempt keeps its run's
        first place: a re-run of an older commit stays older)."""
        run = base_run_id(report.run_id)
        known = runs.get(run) or {}
        opened = known.get("opened") or int(epoch(report.opened_at) if report.opened_at else now)
        return cls(run, int(opened), report.version, report.commit, report.page_url)

    def entry(self) -> dict[str, Any]:
        return {"opened": self.opened, "commit": self.commit, "url": self.url}


def earlier_runs(runs: dict[str, Any], shown: Shown, thread: str = "pull request") -> str:
    """The pull request's (``thread``: a merge request's) other runs, newest first, folded into one
    line with their links."""
    others = sorted(((e.get("opened") or 0, run, e) for run, e in runs.items() if run != shown.run), reverse=True)
    if not others:
        return ""
    lines = [
        f"- run {run}"
        + (f" (commit `{e['commit'][:12]}`)" if e.get("commit") else "")
        + (f": [its report]({e['url']})" if e.get("url") else "")
        for _, run, e in others
    ]
    plural = "s" * (len(others) > 1)
    return (
        f"\n\n<details><summary>{len(others)} earlier run{plural} of this {thread}</summary>\n\n"
        + "\n".join(lines)
        + "\n\n</details>\n"
    )


def comment_body(report: Report, number: int, earlier: str = "", limit: int = BODY_LIMIT) -> str:
    """The report's Markdown under its marker, then the earlier runs' line, its shard table cut
    (then folded away) until it fits: the summary and the worst changes always stay; every shard
    is on the run page."""
    head = marker(report.project, number) + "\n"
    rows = len(report.shards)
    while True:
        body = head + render_markdown(report, shard_rows=rows) + earlier
        if len(body) <= limit:
            return body
        if rows == 0:
            cut = "\n\n(cut to fit a comment: the whole report is on the run page)\n"
            return body[: limit - len(cut)] + cut
        rows //= 2
