"""Reports: publish a run's report after each change (once per batch of arrivals), refresh it
on a signed webhook, read it, list a project's runs, sign links to their pages."""

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

from codspeed_rules.names import pull_request
from codspeed_wire.report import BenchmarkEntry, Report, ShardBenchmarks

from ..adapters.bucket import Bucket
from ..adapters.github_status import GitHubStatuses
from ..adapters.ledger import Baselines, Reads, Runs, SnapshotContended
from ..adapters.metrics import Metrics
from ..adapters.results_store import ResultsStore
from ..auth import signed_query
from ..domain.baseline import branch_of, result_sources
from ..domain.errors import NotFound
from ..domain.keys import answer_key
from ..domain.notification import commit_status
from ..domain.records import OPEN, RunRecord, Snapshot
from ..domain.report import build_report, codspeed_page, compared_with, shard_entry, shard_names
from ..domain.results import SummaryDigest, absent_entries, counted_once, shard_entries
from ..domain.timestamps import iso
from ..services.merged_heads import MergedHeads
from ..services.pr_comments import PullRequestComments
from ..services.run_snapshots import RunSnapshots
from ..services.shard_summaries import ShardSummaries
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
    store: Bucket  # S3: reports/ published and read back
    results: ResultsStore  # S3: results/, each shard's benchmarks
    statuses: GitHubStatuses | None  # GitHub: commit statuses, when configured
    metrics: Metrics
    clock: Callable[[], float] = time.time
    page_key: bytes | None = None  # signs run pages' links (auth.page_key)
    comments: PullRequestComments | None = None  # GitHub, GitLab: the sticky pull-request comment, when configured
    # (project, run) -> its read
    _baselines: dict[tuple[str, str], Snapshot | None] = field(default_factory=dict, init=False, repr=False)
    # (project, branch, base commits) -> (run, when looked up)
    _latest: dict[tuple[str, str, tuple[str, ...]], tuple[str | None, float]] = field(
        default_factory=dict, init=False, repr=False
    )
    _held: threading.local = field(default_factory=threading.local, init=False, repr=False)  # held(), per thread

    def __post_init__(self) -> None:
        self._summaries = ShardSummaries(self.results, self.settings.regression_threshold)
        self._snapshots = RunSnapshots(self.reads, self.results)
        self._heads = MergedHeads(self.statuses)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Within it (a batch of arrivals), each run's report is published once, at the end, from
        a read after the batch's last change to it: under load a run's report is rebuilt once
        per batch instead of once per arrival."""
        held: set[tuple[str, str]] = set()
        self._held.runs = held
        try:
            yield
        finally:
            self._held.runs = None
        for project, run_id in sorted(held):
            self._publish_now(project, run_id)

    def publish(self, project: str, run_id: str) -> RunRecord | None:
        """Publish the run's report (within ``held``: at the batch's end); answers the run's record as
        the report read it, None when it read none (held, contended, or gone)."""
        held = getattr(self._held, "runs", None)
        if held is not None:
            held.add((project, run_id))
            return None
        return self._publish_now(project, run_id)

    def _publish_now(self, project: str, run_id: str) -> RunRecord | None:
        try:
            snapshot = self._snapshots.read(project, run_id)
        except SnapshotContended as exc:
            # Every read saw the run change under it: whoever changed it publishes after its change.
            log.warning("report of %s %s not rebuilt: %s", project, run_id, exc)
            self.metrics.add("ReportsDeferred", 1)
            return None
        if snapshot is None:  # expired meanwhile: no report to rebuild
            return None
        report, digest = self._build(snapshot)
        if self.store.publish_report(project, run_id, report.version, report.model_dump_json()):
            self._leave_digests(digest, snapshot)
            self._notify(report, snapshot.run)
        return snapshot.run

    def _leave_digests(self, digest: SummaryDigest, snapshot: Snapshot) -> None:
        """What the published report summed up and read, for processes new to the run: one not
        left costs them more reads, never a wrong report, and never the notifications after it."""
        try:
            self._summaries.published(snapshot.run.project, snapshot.run.run_id, digest)
            self._snapshots.published(snapshot)
        except Exception as exc:
            log.warning("digests of %s %s not left: %s", snapshot.run.project, snapshot.run.run_id, exc)

    def _build(self, snapshot: Snapshot) -> tuple[Report, SummaryDigest]:
        baseline = self._baseline(snapshot.run)
        digest = self._summaries.summed(snapshot, baseline)
        summary, threshold = digest.summary, self.settings.regression_threshold
        if overlaps := snapshot.run.outcome.overlaps:  # each benchmark counted once
            summary = counted_once(summary, self._summaries.twins(snapshot, baseline, overlaps), threshold)
        report = build_report(
            snapshot,
            iso(self.clock()),
            summary=summary,
            baseline=baseline,
            branch=self._branch(snapshot.run),
            threshold=threshold,
        )
        added = {  # what the run's record alone cannot say: its links, and the head a merge commit merges
            "page_url": self.page_url(snapshot.run.project, snapshot.run.run_id),
            "codspeed_url": codspeed_page(self.settings.upstream_url, snapshot.run),
            "head_commit": snapshot.run.head_commit or self._heads.head_of(snapshot.run),
        }
        return report.model_copy(update=added), digest

    def _baseline(self, run: RunRecord) -> Snapshot | None:
        """The run this one compares with: the one its finalizer chose, or while it is open the
        latest forwarded on its base branch. Its read is kept: a forwarded run does not change."""
        baseline_id = run.outcome.baseline.run_id if run.outcome.baseline else None
        if baseline_id is None and run.state == OPEN:
            baseline_id = self._latest_baseline(run.project, self._branch(run), run.base_commits())
        if baseline_id is None or baseline_id == run.run_id:
            return None
        key = (run.project, baseline_id)
        if key not in self._baselines:
            found = self._snapshots.read(*key)
            if found is None:
                return None
            self._baselines[key] = found
        return self._baselines[key]

    def _branch(self, run: RunRecord) -> str:
        """The branch a run compares with: its base branch, else the stack's default."""
        return branch_of(run.base_ref) or self.settings.default_branch

    def _latest_baseline(self, project: str, branch: str, commits: tuple[str, ...]) -> str | None:
        """The branch's run at the change's base commit (or its nearest ancestor with one), else its
        latest forwarded run, looked up at most once a minute per process once found: an open run's
        report compares with it, and is rebuilt after every batch of arrivals. None found is never
        kept: another process may forward the branch's run the next second."""
        now, key = self.clock(), (project, branch, commits[:1])  # a base commit's ancestors are always the same
        if key not in self._latest or self._latest[key][1] < now - BASELINE_LOOKUP_SECONDS:
            found = self.baselines.baseline_for(project, branch, commits)
            if found is None:
                return None
            self._latest[key] = (found, now)
        return self._latest[key][0]

    def baseline_moved(self, project: str, branch: str, run_id: str, commit: str | None, at: float) -> None:
        """A run was forwarded on ``branch`` by this process: its reports compare with it at once."""
        self._latest[(project, branch, ())] = (run_id, at)
        if commit:
            self._latest[(project, branch, (commit,))] = (run_id, at)

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

    def _notify(self, report: Report, run: RunRecord) -> None:
        """The commit status and the pull-request comment: courtesies, which never fail an arrival
        or a forward. A run an upload of which came without a token posts no comment: anyone can
        send one, naming any pull request."""
        if run.provider in (None, "GITHUB"):  # a GitLab project's run: GitHub knows nothing of it
            self._post_status(report)
        if self.comments is not None and not run.tokenless:
            try:
                self.comments.show(report, run.provider)
            except Exception as exc:
                log.warning("pull-request comment for %s %s not posted: %s", report.project, report.run_id, exc)

    def _post_status(self, report: Report) -> None:
        status = commit_status(report)
        # on a pull request, its head: GitHub shows no status posted on its test merge commit
        shown = report.head_commit or (None if pull_request(report.ref) is not None else report.commit)
        if status is not None and self.statuses and shown:
            try:
                self.statuses.post(report.project, shown, *status, target_url=report.page_url)
            except Exception as exc:
                log.warning("commit status for %s %s not posted: %s", report.project, report.run_id, exc)

    def refresh(self, project: str, run_id: str) -> Report:
        """Re-render and republish a run's report (a signed webhook asks for it)."""
        if not self.runs.touch(project, run_id):
            raise NotFound(f"no run {run_id} for project {project}")
        self.publish(project, run_id)
        return self.report(project, run_id)

    def report(self, project: str, run_id: str) -> Report:
        """A run's latest report: of the attempt ``run_id`` names, or of the run's latest attempt."""
        run_id = self.runs.attempt_of(project, run_id)
        published = self.store.read_report(project, run_id)
        if published is not None:
            return Report.model_validate_json(published)
        snapshot = self.reads.snapshot(project, run_id)
        if snapshot is None:
            raise NotFound(f"no run {run_id} for project {project}")
        return self._build(snapshot)[0]

    def shard_benchmarks(self, project: str, run_id: str, shard: str) -> ShardBenchmarks:
        """Every benchmark of one shard of a run (its latest attempt, or the one ``run_id`` names),
        compared with the baseline: measured in this run, or the baseline's carried, running or
        missing."""
        run_id = self.runs.attempt_of(project, run_id)
        snapshot = self._snapshots.read(project, run_id)
        if snapshot is None:
            raise NotFound(f"no run {run_id} for project {project}")
        if shard not in shard_names(snapshot):
            raise NotFound(f"run {run_id} of {project} has no shard {shard!r}")
        run, threshold, baseline = snapshot.run, self.settings.regression_threshold, self._baseline(snapshot.run)
        if (record := snapshot.arrived().get(shard)) is not None:
            found = self.results.read(record.key) if record.results_kept and record.key else None
            figures = found.results if found else {}
            sources = result_sources(baseline) if baseline else {}
            before = self._summaries.before(baseline, sources, shard, figures)
            benchmarks = shard_entries(shard, figures, before, threshold)
        else:
            benchmarks = self._not_measured(snapshot, shard, baseline)
        return ShardBenchmarks(
            project=project,
            run_id=run_id,
            shard=shard,
            state=shard_entry(snapshot, shard).state,
            baseline=compared_with(run, baseline, self._branch(run)),
            threshold=threshold,
            benchmarks=benchmarks,
        )

    def _not_measured(self, snapshot: Snapshot, shard: str, baseline: Snapshot | None) -> list[BenchmarkEntry]:
        """A shard's benchmarks where the run measured none of them: its baseline's figures, carried,
        or still running (missing once the run ended); none where no run holds them."""
        run = snapshot.run
        carried = run.outcome.carried.get(shard)
        if carried is not None and carried.key and (found := self.results.read(carried.key)):
            return absent_entries(shard, found.results, "carried", carried.said)
        sources = result_sources(baseline) if baseline else {}
        if baseline and shard in sources and (found := self.results.read(sources[shard][0])):
            state = "running" if run.state == OPEN else "missing"
            return absent_entries(shard, found.results, state, f"run {baseline.run.run_id}")
        return []

    def answer_link(self, project: str, body: str, markdown: bool = False) -> str:
        """A presigned link to an answer's ``body`` (JSON, or ``markdown``) written to S3: for one over
        what Lambda may send. Its key is its content's digest, so it is written once, not again (a
        version kept 15 days) at every GET of the same answer."""
        key = answer_key(project, hashlib.sha256(body.encode()).hexdigest()[:32], "md" if markdown else "json")
        self.store.put_once(key, body, "text/markdown; charset=utf-8" if markdown else "application/json")
        return self.store.presign_get(key, REPORT_LINK_SECONDS)

    def report_link(self, project: str, run_id: str) -> str | None:
        """A presigned link to a run's latest published report, for an answer too large for
        Lambda's 6 MB; None when none was published yet."""
        key = self.store.latest_report_key(project, self.runs.attempt_of(project, run_id))
        return None if key is None else self.store.presign_get(key, REPORT_LINK_SECONDS)

    def recent_runs(self, project: str, limit: int = 50) -> list[RunRecord]:
        """A project's latest runs, newest first."""
        return self.runs.recent_runs(project, limit)

    def has_run(self, project: str, run_id: str) -> bool:
        return self.runs.run_record(project, self.runs.attempt_of(project, run_id)) is not None
