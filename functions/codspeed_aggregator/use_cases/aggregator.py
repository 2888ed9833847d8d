"""``Aggregator`` is what one function runs on: the adapters wiring built for it, and each use
case built on those when first asked for. A use case names the adapters it touches in its own
fields, so what a change may need in IAM is read at the top of its module. Each use case is imported
where it is built: a function loads what it runs, never what the others do."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from ..adapters.metrics import Metrics, NoMetrics
from ..settings import Settings

if TYPE_CHECKING:  # each built where asked for: a function loads the use cases it runs, not the others'
    from ..adapters.bucket import Bucket
    from ..adapters.github_comments import GitHubComments
    from ..adapters.github_commits import GitHubCommits
    from ..adapters.github_pulls import GitHubPulls
    from ..adapters.github_status import GitHubStatuses
    from ..adapters.gitlab_notes import GitLabNotes
    from ..adapters.ledger import Ledger
    from ..adapters.queues import FinalizeQueue, Queue
    from ..adapters.results_store import ResultsStore
    from ..adapters.upstream_http import UpstreamClient
    from ..services.run_attempts import RunAttempts
    from ..services.upload_grants import UploadGrants
    from .benchmark_costs import BenchmarkCosts
    from .close_run import CloseRun
    from .finalize_run import FinalizeRun
    from .fork_pull_requests import ForkPullRequests
    from .forward_part import ForwardPart
    from .forward_shard import ForwardShard
    from .give_back_upload import GiveBackUpload
    from .open_run import OpenRun
    from .project_tokens import ProjectTokens
    from .record_arrival import RecordArrival
    from .reports import Reports
    from .request_upload import RequestUpload
    from .runner_upload import RunnerUpload
    from .sweep_deadlines import SweepDeadlines


@dataclass
class Aggregator:
    settings: Settings
    ledger: Ledger  # DynamoDB
    store: Bucket | None = None  # S3
    results: ResultsStore | None = None  # S3: the shards' benchmarks
    queue: FinalizeQueue | None = None  # SQS
    arrivals_queue: Queue | None = None  # SQS: the arrivals function's own
    upstream: UpstreamClient | None = None  # the finalizer's only
    statuses: GitHubStatuses | None = None  # commit statuses on GitHub, when configured
    github_comments: GitHubComments | None = None  # pull-request comments on GitHub, when configured
    gitlab_notes: GitLabNotes | None = None  # merge-request notes on GitLab, when configured
    github_commits: GitHubCommits | None = None  # a pull request's merge base, asked of GitHub when configured
    github_pulls: GitHubPulls | None = None  # what a request without a token claims, checked with GitHub when it can
    metrics: Metrics | None = None
    clock: Callable[[], float] = time.time
    page_key: bytes | None = None  # signs run pages' links (auth.page_key)

    @cached_property
    def _metrics(self) -> Metrics:
        return self.metrics or NoMetrics()

    @cached_property
    def reports(self) -> Reports:
        from ..services.pr_comments import PullRequestComments
        from .reports import Reports

        hosts = {
            provider: host
            for provider, host in (("GITHUB", self.github_comments), ("GITLAB", self.gitlab_notes))
            if host is not None
        }
        comments = (
            PullRequestComments(
                comments=self.ledger.comments,
                hosts=hosts,
                quiet_seconds=self.settings.comment_seconds,
                clock=self.clock,
            )
            if hosts
            else None
        )
        return Reports(
            settings=self.settings,
            reads=self.ledger.reads,
            runs=self.ledger.runs,
            baselines=self.ledger.baselines,
            store=_built(self.store, "the bucket"),
            results=_built(self.results, "the results store"),
            statuses=self.statuses,
            metrics=self._metrics,
            clock=self.clock,
            page_key=self.page_key,
            comments=comments,
        )

    @cached_property
    def _grants(self) -> UploadGrants:
        from ..services.upload_grants import UploadGrants

        return UploadGrants(
            settings=self.settings,
            runs=self.ledger.runs,
            closes=self.ledger.closes,
            shards=self.ledger.shards,
            store=_built(self.store, "the bucket"),
            attempts=self._attempts,
            clock=self.clock,
        )

    @cached_property
    def request_upload(self) -> RequestUpload:
        from .request_upload import RequestUpload

        return RequestUpload(settings=self.settings, grants=self._grants)

    @cached_property
    def runner_upload(self) -> RunnerUpload:
        from .runner_upload import RunnerUpload

        return RunnerUpload(grants=self._grants, ci_jobs=self.ledger.ci_jobs)

    @cached_property
    def give_back_upload(self) -> GiveBackUpload:
        from .give_back_upload import GiveBackUpload

        return GiveBackUpload(
            reads=self.ledger.reads,
            shards=self.ledger.shards,
            store=_built(self.store, "the bucket"),
            queue=_built(self.queue, "the finalize queue"),
            reports=self.reports,
        )

    @cached_property
    def _attempts(self) -> RunAttempts:
        from ..services.run_attempts import RunAttempts

        return RunAttempts(settings=self.settings, runs=self.ledger.runs, shards=self.ledger.shards)

    @cached_property
    def fork_pull_requests(self) -> ForkPullRequests:
        from .fork_pull_requests import ForkPullRequests

        return ForkPullRequests(
            settings=self.settings, runs=self.ledger.runs, pulls=self.github_pulls, clock=self.clock
        )

    @cached_property
    def record_arrival(self) -> RecordArrival:
        from .bundle_validation import BundleValidation
        from .record_arrival import RecordArrival

        return RecordArrival(
            settings=self.settings,
            reads=self.ledger.reads,
            shards=self.ledger.shards,
            runs=self.ledger.runs,
            validation=BundleValidation(
                settings=self.settings, store=_built(self.store, "the bucket"), metrics=self._metrics
            ),
            results=_built(self.results, "the results store"),
            queue=_built(self.queue, "the finalize queue"),
            arrivals_queue=self.arrivals_queue,
            attempts=self._attempts,
            reports=self.reports,
            metrics=self._metrics,
            clock=self.clock,
        )

    @cached_property
    def benchmark_costs(self) -> BenchmarkCosts:
        from .benchmark_costs import BenchmarkCosts

        return BenchmarkCosts(
            settings=self.settings,
            reads=self.ledger.reads,
            baselines=self.ledger.baselines,
            results=_built(self.results, "the results store"),
        )

    @cached_property
    def open_run(self) -> OpenRun:
        from .open_run import OpenRun

        return OpenRun(
            settings=self.settings,
            runs=self.ledger.runs,
            shards=self.ledger.shards,
            baselines=self.ledger.baselines,
            queue=_built(self.queue, "the finalize queue"),
            reports=self.reports,
            clock=self.clock,
        )

    @cached_property
    def close_run(self) -> CloseRun:
        from .close_run import CloseRun

        return CloseRun(
            settings=self.settings,
            reads=self.ledger.reads,
            runs=self.ledger.runs,
            closes=self.ledger.closes,
            baselines=self.ledger.baselines,
            queue=_built(self.queue, "the finalize queue"),
            clock=self.clock,
        )

    @cached_property
    def sweep_deadlines(self) -> SweepDeadlines:
        from .sweep_deadlines import SweepDeadlines

        return SweepDeadlines(
            runs=self.ledger.runs,
            closes=self.ledger.closes,
            queue=_built(self.queue, "the finalize queue"),
            clock=self.clock,
        )

    @cached_property
    def _forwarder(self) -> ForwardPart:
        from .forward_part import ForwardPart

        return ForwardPart(
            settings=self.settings,
            shards=self.ledger.shards,
            parts=self.ledger.parts,
            store=_built(self.store, "the bucket"),
            upstream=_built(self.upstream, "the upstream"),
            metrics=self._metrics,
        )

    @cached_property
    def forward_shard(self) -> ForwardShard:
        from .forward_shard import ForwardShard

        return ForwardShard(
            settings=self.settings,
            reads=self.ledger.reads,
            parts=self.ledger.parts,
            store=_built(self.store, "the bucket"),
            queue=_built(self.queue, "the finalize queue"),
            forwarder=self._forwarder,
            reports=self.reports,
            metrics=self._metrics,
            clock=self.clock,
        )

    @cached_property
    def finalize_run(self) -> FinalizeRun:
        return _finalize_run(self)

    @cached_property
    def project_tokens(self) -> ProjectTokens:
        from .project_tokens import ProjectTokens

        return ProjectTokens(tokens=self.ledger.tokens, clock=self.clock)


def _finalize_run(agg: Aggregator) -> FinalizeRun:
    """The finalizer's use case: its plan, its forward, its close's barrier and its kept sources."""
    from ..services.close_barrier import CloseBarrier
    from .finalize_run import FinalizeRun
    from .keep_sources import KeepSources
    from .merge_bases import MergeBases
    from .plan_forward import PlanForward

    planner = PlanForward(
        settings=agg.settings,
        reads=agg.ledger.reads,
        baselines=agg.ledger.baselines,
        sources=agg.ledger.sources,
        store=_built(agg.store, "the bucket"),
        results=_built(agg.results, "the results store"),
        forwarder=agg._forwarder,
        clock=agg.clock,
        merge_bases=MergeBases(github=agg.github_commits),
    )
    return FinalizeRun(
        settings=agg.settings,
        reads=agg.ledger.reads,
        runs=agg.ledger.runs,
        parts=agg.ledger.parts,
        baselines=agg.ledger.baselines,
        store=_built(agg.store, "the bucket"),
        queue=_built(agg.queue, "the finalize queue"),
        planner=planner,
        forwarder=agg._forwarder,
        reports=agg.reports,
        metrics=agg._metrics,
        barrier=CloseBarrier(
            settings=agg.settings,
            reads=agg.ledger.reads,
            closes=agg.ledger.closes,
            store=_built(agg.store, "the bucket"),
            queue=_built(agg.queue, "the finalize queue"),
            arrivals=agg.record_arrival,
            reports=agg.reports,
            metrics=agg._metrics,
            clock=agg.clock,
        ),
        clock=agg.clock,
        keeper=KeepSources(
            store=_built(agg.store, "the bucket"),
            results=_built(agg.results, "the results store"),
            sources=agg.ledger.sources,
            clock=agg.clock,
        ),
    )


A = TypeVar("A")


def _built(adapter: A | None, what: str) -> A:
    """An adapter a use case needs: each function is built with those its use cases touch only
    (``wiring._NEEDS``), so one missing here is a use case asked of the wrong function."""
    if adapter is None:
        raise RuntimeError(f"this function was built without {what}: see wiring._NEEDS")
    return adapter
