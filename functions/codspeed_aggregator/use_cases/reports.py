"""Reports: publish a run's report after each change (once per batch of arrivals), refresh it
on a signed webhook, read it, list a project's runs, sign links to their pages."""

import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

from codspeed_wire.report import Report, render_markdown

from ..adapters.bundle_store import BundleStore
from ..adapters.github_status import GitHubStatuses
from ..adapters.ledger import Baselines, Reads, Runs, SnapshotContended
from ..adapters.metrics import Metrics
from ..auth import signed_query
from ..domain.baseline import branch_of
from ..domain.errors import NotFound
from ..domain.ledger import OPEN, RunRecord, Snapshot
from ..domain.notification import commit_status
from ..domain.report import build_report
from ..domain.timestamps import iso
from ..settings import Settings

log = logging.getLogger(__name__)

BASELINE_LOOKUP_SECONDS = 60
REPORT_LINK_SECONDS = 300  # a report too large to answer inline is fetched from S3 at once


@dataclass
class Reports:
    settings: Settings
    reads: Reads  # DynamoDB: run snapshots
    runs: Runs  # DynamoDB: a refresh's revision, the project's list of runs
    baselines: Baselines  # DynamoDB: the latest forwarded run of a branch
    store: BundleStore  # S3: reports/ (published, and the baselines' read back)
    statuses: GitHubStatuses | None  # GitHub: commit statuses, when configured
    metrics: Metrics
    clock: Callable[[], float] = time.time
    page_key: bytes | None = None  # signs run pages' links (auth.page_key)
    _baselines: dict = field(default_factory=dict, init=False, repr=False)  # (project, run) -> its Report
    _latest: dict = field(default_factory=dict, init=False, repr=False)  # (project, branch) -> (run, when looked up)
    _held: threading.local = field(default_factory=threading.local, init=False, repr=False)  # held(), per thread

    @contextmanager
    def held(self):
        """Within it (a batch of arrivals), each run's report is published once, at the end, from
        a read after the batch's last change to it: under load a run's report is rebuilt once
        per batch instead of once per arrival."""
        self._held.runs = held = set()
        try:
            yield
        finally:
            self._held.runs = None
        for project, run_id in sorted(held):
            self._publish_now(project, run_id)

    def publish(self, project: str, run_id: str) -> None:
        held = getattr(self._held, "runs", None)
        if held is not None:
            held.add((project, run_id))
        else:
            self._publish_now(project, run_id)

    def _publish_now(self, project: str, run_id: str) -> None:
        try:
            snapshot = self.reads.snapshot(project, run_id, with_names=True)  # the report lists results
        except SnapshotContended as exc:
            # Every read saw the run change under it: whoever changed it publishes after its change.
            log.warning("report of %s %s not rebuilt: %s", project, run_id, exc)
            self.metrics.add("ReportsDeferred", 1)
            return
        report = self._build(snapshot)
        if self.store.publish_report(project, run_id, report.version, report.model_dump_json(), render_markdown(report)):
            self._notify(report)

    def _build(self, snapshot: Snapshot) -> Report:
        return build_report(snapshot, iso(self.clock()), baseline=self._baseline_report(snapshot.run),
                            threshold=self.settings.regression_threshold,
                            page_url=self.page_url(snapshot.run.project, snapshot.run.run_id))

    def _baseline_report(self, run: RunRecord) -> Report | None:
        """The report of the run this one compares with: the one its finalizer chose, or while it
        is open the latest forwarded on its base branch. Read from the bucket (it holds the
        baseline's results), and kept: a forwarded run's results do not change."""
        chosen = (run.outcome or {}).get("baseline") or {}
        baseline_id = chosen.get("run_id")
        if baseline_id is None and run.state == OPEN:
            baseline_id = self._latest_baseline(run.project, branch_of(run.base_ref) or self.settings.default_branch)
        if baseline_id is None or baseline_id == run.run_id:
            return None
        key = (run.project, baseline_id)
        if key not in self._baselines:
            published = self.store.read_report(*key)
            if published is None:
                return None
            self._baselines[key] = Report.model_validate_json(published)
        return self._baselines[key]

    def _latest_baseline(self, project: str, branch: str) -> str | None:
        """The branch's latest forwarded run, looked up at most once a minute per process: an open
        run's report compares with it, and is rebuilt after every batch of arrivals."""
        now, key = self.clock(), (project, branch)
        if key not in self._latest or self._latest[key][1] < now - BASELINE_LOOKUP_SECONDS:
            self._latest[key] = (self.baselines.latest_baseline(project, branch), now)
        return self._latest[key][0]

    def baseline_moved(self, project: str, branch: str, run_id: str, at: float) -> None:
        """A run was forwarded on ``branch`` by this process: its reports compare with it at once."""
        self._latest[(project, branch)] = (run_id, at)

    def page_url(self, project: str, run_id: str = "", base: str | None = None, until: int | None = None) -> str | None:
        """A signed link to a run's page (or, with no run, to the project's list of runs), good for
        ``PageLinkDays`` or until ``until``, whichever comes first."""
        base = base or self.settings.public_url
        if self.page_key is None or base is None:
            return None
        expires = int(self.clock()) + self.settings.page_link_days * 86400
        expires = min(expires, until) if until is not None else expires
        path = f"/runs/{project}" + (f"/{quote(run_id, safe='~:+')}" if run_id else "")
        return f"{base}{path}?{signed_query(self.page_key, project, run_id, expires)}"

    def _notify(self, report: Report) -> None:
        status = commit_status(report) if self.statuses and report.commit else None
        if status is None:
            return
        try:
            self.statuses.post(report.project, report.commit, *status, target_url=report.page_url)
        except Exception as exc:  # a status is a courtesy: it never fails an arrival or a forward
            log.warning("commit status for %s %s not posted: %s", report.project, report.run_id, exc)

    def refresh(self, project: str, run_id: str) -> Report:
        """Re-render and republish a run's report (a signed webhook asks for it)."""
        if not self.runs.touch(project, run_id):
            raise NotFound(f"no run {run_id} for project {project}")
        self.publish(project, run_id)
        return self.report(project, run_id)

    def report(self, project: str, run_id: str) -> Report:
        """A run's latest report: of the attempt ``run_id`` names, or of the run's latest attempt."""
        run_id = self.runs.attempt_of(project, run_id, self.settings.max_attempts)
        published = self.store.read_report(project, run_id)
        if published is not None:
            return Report.model_validate_json(published)
        snapshot = self.reads.snapshot(project, run_id, with_names=True)
        if snapshot is None:
            raise NotFound(f"no run {run_id} for project {project}")
        return self._build(snapshot)

    def report_link(self, project: str, run_id: str, fmt: str = "json") -> str | None:
        """A presigned link to a run's latest published report (JSON or Markdown), for an answer
        too large for Lambda's 6 MB; None when none was published yet."""
        key = self.store.latest_report_key(project, self.runs.attempt_of(project, run_id, self.settings.max_attempts))
        if key is None:
            return None
        return self.store.presign_get(key if fmt == "json" else key.removesuffix(".json") + ".md", REPORT_LINK_SECONDS)

    def recent_runs(self, project: str, limit: int = 50) -> list[RunRecord]:
        """A project's latest runs, newest first."""
        return self.runs.recent_runs(project, limit)

    def has_run(self, project: str, run_id: str) -> bool:
        return self.runs.run_record(project, self.runs.attempt_of(project, run_id, self.settings.max_attempts)) is not None
