"""Build each Lambda function's use cases from the environment, once per process (a cold start).

Each function gets only the adapters its use cases touch, on boto3 clients of its own (its
role's credentials): the api, arrivals, finalizer and sweeper functions of template.yaml, and
the operator's commands."""

from __future__ import annotations

import importlib
import logging
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

from .adapters import aws
from .settings import Settings, settings
from .use_cases.aggregator import Aggregator

if TYPE_CHECKING:  # each adapter imported where a function builds it: none loads another's
    from .adapters.ci_oidc import CiOidc
    from .adapters.github_pulls import GitHubPulls
    from .adapters.upstream_http import UpstreamClient

API, ARRIVALS, FINALIZER, OPERATOR = "api", "arrivals", "finalizer", aws.OPERATOR
# What each function builds: the table always; the bucket, the queue, the upstream, and whether
# it publishes reports (which may post commit statuses and sign page links).
_NEEDS = {
    API: {"bucket", "queue", "reports"},
    ARRIVALS: {"bucket", "queue", "arrivals_queue", "arrivals_dead_letter", "reports"},
    FINALIZER: {"bucket", "queue", "upstream", "reports"},
    OPERATOR: set(),
}
_SETTINGS = {
    "bucket": "bucket_name",
    "queue": "finalize_queue_url",
    "arrivals_queue": "arrivals_queue_url",
    "arrivals_dead_letter": "arrivals_dead_letter_url",
    "upstream": "upstream_url",
}

# The use cases each function runs, loaded at its cold start (Lambda's init, not its first request):
# ``Aggregator`` imports a use case where it builds it, so a function loads none of the others'.
_RUNS = {
    API: (
        "benchmark_costs",
        "close_run",
        "fork_pull_requests",
        "give_back_upload",
        "open_run",
        "project_tokens",
        "reports",
        "request_upload",
        "runner_upload",
    ),
    ARRIVALS: ("record_arrival", "reports"),
    FINALIZER: ("finalize_run", "forward_shard", "reports"),
}

_LOCK = threading.RLock()


def load(name: str) -> None:
    """Import the use cases function ``name`` runs (its handler does, when it is loaded)."""
    for use_case in _RUNS[name]:
        importlib.import_module(f"{__package__}.use_cases.{use_case}")


def for_api() -> Aggregator:
    return for_function(API)


def for_arrivals() -> Aggregator:
    return for_function(ARRIVALS)


def for_finalizer() -> Aggregator:
    return for_function(FINALIZER)


def for_operator() -> Aggregator:
    """The operator's commands (``codspeed-aggregator token``): the table only."""
    return for_function(OPERATOR)


def for_function(name: str) -> Aggregator:
    with _LOCK:  # one per function and process, even when threads (the local stack's) ask at once
        return _function(name)


@cache
def _function(name: str) -> Aggregator:
    return build(name, settings())


def build(name: str, config: Settings) -> Aggregator:
    """Function ``name``'s use cases on ``config``: refused, before any client is made, when a
    setting it needs is missing."""
    from .adapters.bucket import Bucket
    from .adapters.ledger import Ledger
    from .adapters.metrics import CloudWatchMetrics, is_metrics_disabled
    from .adapters.queues import FinalizeQueue, Queue
    from .adapters.results_store import ResultsStore

    needs = _NEEDS[name]
    config.require(name, "table_name", *(_SETTINGS[n] for n in sorted(needs) if n in _SETTINGS))
    return Aggregator(
        settings=config,
        ledger=Ledger.on(config.table_name, aws.client("dynamodb", name), config.retention_days * 86400),
        store=Bucket(config.bucket_name, aws.client("s3", name)) if "bucket" in needs else None,
        results=ResultsStore(config.bucket_name, aws.client("s3", name)) if "bucket" in needs else None,
        queue=FinalizeQueue(config.finalize_queue_url, aws.client("sqs", name)) if "queue" in needs else None,
        arrivals_queue=Queue(config.arrivals_queue_url, aws.client("sqs", name), config.arrivals_dead_letter_url)
        if "arrivals_queue" in needs
        else None,
        upstream=_upstream(name, config) if "upstream" in needs else None,
        metrics=None if is_metrics_disabled() else CloudWatchMetrics(),
        page_key=_page_key(name) if "reports" in needs else None,
        **_hosts(name, config, "reports" in needs),
    )


def _hosts(name: str, config: Settings, reports: bool) -> dict[str, Any]:
    """GitHub's and GitLab's adapters function ``name`` uses, as configured: statuses and comments where
    reports are published, merge bases in the finalizer, a fork's checks in the API."""
    from .adapters.github_commits import GitHubCommits
    from .adapters.github_status import GitHubStatuses

    return {
        "statuses": GitHubStatuses(config.github_api_url, _github_token(name, config))
        if reports and config.commit_status
        else None,
        **(_comment_hosts(name, config) if reports and config.pr_comments else {}),
        "github_commits": GitHubCommits(config.github_api_url, _github_token(name, config))
        if name == FINALIZER and (config.commit_status or config.pr_comments)
        else None,
        "github_pulls": _github_pulls(name, config) if name == API and config.tokenless_projects else None,
    }


def _comment_hosts(name: str, config: Settings) -> dict[str, Any]:
    """Where pull requests' comments go: GitHub always, GitLab's notes where the stack knows its API."""
    from .adapters.github_comments import GitHubComments
    from .adapters.gitlab_notes import GitLabNotes

    notes = None
    if config.gitlab_api_url:
        notes = GitLabNotes(config.gitlab_api_url, aws.secret(config.gitlab_token, config.gitlab_token_parameter, name))
    return {
        "github_comments": GitHubComments(config.github_api_url, _github_token(name, config)),
        "gitlab_notes": notes,
    }


def _github_token(function: str, config: Settings) -> str | None:
    return aws.secret(config.github_token, config.github_token_parameter, function)


def _github_pulls(function: str, config: Settings) -> GitHubPulls | None:
    """GitHub, to check a fork's pull request that sends no token: None when the stack has no GitHub
    token (its parameter was never created; then the client's route refuses such requests)."""
    from .adapters.github_pulls import GitHubPulls

    token = aws.secret_if_set(config.github_token, config.github_token_parameter, function)
    return GitHubPulls(config.github_api_url, token) if token else None


def _upstream(function: str, config: Settings) -> UpstreamClient:
    from .adapters.upstream_http import UpstreamClient
    from .adapters.upstream_tokens import UpstreamTokens

    token = aws.secret(config.upstream_token, config.upstream_token_parameter, function)
    tokens = UpstreamTokens(config.upstream_tokens_path, token, lambda parameter: aws.secret(None, parameter, function))
    return UpstreamClient(
        config.upstream_url,
        token,
        timeout=config.upstream_timeout_seconds,
        attempts=config.upstream_attempts,
        tokens=tokens,
    )


def _page_key(function: str) -> bytes | None:
    """The key of run pages' links, or None (no links) when no webhook secret can be read: a
    deployment without one still counts and forwards, its reports just carry no page_url."""
    from .auth import page_key

    try:
        master = webhook_secret(function)
    except Exception as exc:  # powertools' GetParameterError: the parameter was never created
        logging.getLogger(__name__).warning("run pages get no signed links: %s", exc)
        return None
    return page_key(master) if master else None


def api_token() -> str | None:
    config = settings()
    return aws.secret(config.api_token, config.api_token_parameter, API)


@cache
def oidc() -> CiOidc | None:
    """CI jobs' OIDC tokens (GitHub Actions', and CircleCI's of the organizations listed) are
    accepted unless the audience is set empty."""
    from .adapters.ci_oidc import CiOidc

    config = settings()
    if not config.oidc_audience:
        return None
    return CiOidc(
        config.oidc_audience,
        jwks_url=config.oidc_jwks_url,
        circleci_orgs=config.circleci_org_ids,
        circleci_jwks_url=config.circleci_jwks_url,
    )


def webhook_secret(function: str = API) -> str | None:
    config = settings()
    return aws.secret(config.webhook_secret, config.webhook_secret_parameter, function)


def reset() -> None:
    """Forget what was built from the environment (the local stack sets it, then calls this)."""
    with _LOCK:
        settings.cache_clear()
        aws.cache_clear()
        _function.cache_clear()
        oidc.cache_clear()
        from . import sweeper_wiring

        sweeper_wiring.reset()
