"""Build the Aggregator from the environment, once per process (a Lambda cold start)."""

import logging
import threading
from functools import cache

from .adapters.aws import client, secret
from .adapters.bundle_store import BundleStore
from .adapters.finalize_queue import FinalizeQueue
from .adapters.github_oidc import GitHubOidc
from .adapters.github_status import GitHubStatuses
from .adapters.ledger_table import DynamoLedger
from .adapters.metrics import CloudWatchMetrics, is_metrics_disabled
from .adapters.upstream_http import UpstreamClient
from .auth import page_key
from .service import Aggregator
from .settings import settings


_LOCK = threading.RLock()


def aggregator() -> Aggregator:
    with _LOCK:  # one per process, even when threads (the local stack's) ask at once
        return _aggregator()


@cache
def _aggregator() -> Aggregator:
    config = settings()
    return Aggregator(
        settings=config,
        ledger=DynamoLedger(config.table_name, client("dynamodb"), config.retention_days * 86400),
        store=BundleStore(config.bucket_name, client("s3")),
        queue=FinalizeQueue(config.finalize_queue_url, client("sqs")),
        upstream=UpstreamClient(
            config.upstream_url,
            secret(config.upstream_token, config.upstream_token_parameter),
            timeout=config.upstream_timeout_seconds, attempts=config.upstream_attempts,
        ),
        statuses=GitHubStatuses(config.github_api_url, secret(config.github_token, config.github_token_parameter))
        if config.commit_status else None,
        metrics=None if is_metrics_disabled() else CloudWatchMetrics(),
        page_key=_page_key(),
    )


def _page_key() -> bytes | None:
    """The key of run pages' links, or None (no links) when no webhook secret can be read: a
    deployment without one still counts and forwards, its reports just carry no page_url."""
    try:
        master = webhook_secret()
    except Exception as exc:  # powertools' GetParameterError: the parameter was never created
        logging.getLogger(__name__).warning("run pages get no signed links: %s", exc)
        return None
    return page_key(master) if master else None


def api_token() -> str | None:
    config = settings()
    return secret(config.api_token, config.api_token_parameter)


@cache
def oidc() -> GitHubOidc | None:
    """GitHub Actions OIDC tokens are accepted unless the audience is set empty."""
    config = settings()
    return GitHubOidc(config.oidc_audience, jwks_url=config.oidc_jwks_url) if config.oidc_audience else None


def webhook_secret() -> str | None:
    config = settings()
    return secret(config.webhook_secret, config.webhook_secret_parameter)


def reset() -> None:
    """Forget what was built from the environment (the local stack sets it, then calls this)."""
    with _LOCK:
        settings.cache_clear()
        client.cache_clear()
        _aggregator.cache_clear()
        oidc.cache_clear()
