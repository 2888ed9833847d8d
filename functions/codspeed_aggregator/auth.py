"""Who may call: the API token (401 when absent, 403 when wrong), a GitHub Actions OIDC token
(CodSpeed's recommended setup: it names its repository), no token at all (a fork's pull request:
``use_cases.fork_pull_requests`` decides what it may do), and webhook signatures (HMAC-SHA256 of
the body, as GitHub signs, 401 when absent or wrong). All comparisons of secrets are constant-time."""

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .domain.errors import Forbidden, Unauthorized, Unsupported


def token_digest(token: str) -> str:
    """Project tokens are stored as this digest, never as themselves."""
    return hashlib.sha256(token.encode()).hexdigest()


NO_TOKEN = "missing Authorization header: send the aggregator's token"


@dataclass(frozen=True)
class Principal:
    project: str | None  # None: the operator's token, good for every project
    anonymous: bool = False  # no token: only what a fork's pull request may do (use_cases.fork_pull_requests)

    def allow(self, project: str) -> None:
        if self.anonymous:
            raise Unauthorized(NO_TOKEN)
        if self.project is not None and self.project != project:
            raise Forbidden(f"this token is for project {self.project}: it cannot read or change {project}")


def _is_jwt(token: str) -> bool:
    return token.startswith("eyJ") and token.count(".") == 2


def job_token(presented: str | None) -> tuple[str, int] | None:
    """A CI job's OIDC token (verified by ``authenticate`` first) and its expiry: what CodSpeed takes
    from that job too, relayed with its part while it is valid. A static token is ours, never relayed."""
    found = _job_claims(presented)
    return (found[0], int(found[1]["exp"])) if found else None


def job_attempt(presented: str | None) -> int | None:
    """The CI attempt a job's OIDC token names (GitHub's ``run_attempt`` claim); None for any other token."""
    found = _job_claims(presented)
    attempt = str(found[1].get("run_attempt", "")) if found else ""
    return int(attempt) if attempt.isdigit() and int(attempt) >= 1 else None


def _job_claims(presented: str | None) -> tuple[str, dict[str, Any]] | None:
    """A job's OIDC token and its claims (verified by ``authenticate`` first); None for a static token."""
    token = (presented or "").removeprefix("Bearer ").strip()
    if not _is_jwt(token):
        return None
    import jwt  # loaded by its verification already

    return token, dict(jwt.decode(token, options={"verify_signature": False}))


def authenticate(
    presented: str | None,
    operator_token: str | None,
    project_of: Callable[[str], str | None],
    oidc_repository: Callable[[str], str] | None = None,
) -> Principal:
    """The operator's token (configured), a project token (its digest in the ledger), or a GitHub
    Actions OIDC token (good for the repository it names)."""
    if not presented:
        raise Unauthorized(NO_TOKEN)
    token = presented.removeprefix("Bearer ").strip()
    if operator_token and hmac.compare_digest(token.encode(), operator_token.encode()):
        return Principal(None)
    if _is_jwt(token):
        if oidc_repository is None:
            raise Forbidden("this aggregator accepts no OIDC tokens (its OIDC audience is not set): send its token")
        return Principal(oidc_repository(token))  # refused: OidcRefused, a Forbidden saying why
    project = project_of(token_digest(token)) if token else None
    if project is None:
        raise Forbidden("the token is not valid for this aggregator")
    return Principal(project)


SIGNATURE_MAX_AGE = 300


def signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body``: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def check_signature(body: bytes, presented: str | None, secret: str | None) -> None:
    if not secret:
        raise Forbidden("the aggregator has no webhook secret configured: webhooks are refused")
    if not presented:
        raise Unauthorized("missing X-Hub-Signature-256 header: sign the body with HMAC-SHA256")
    if not hmac.compare_digest(presented.encode(), signature(secret, body).encode()):
        raise Unauthorized("the X-Hub-Signature-256 signature does not match the body")


def github_webhook_secret(master: str, scope: str) -> str:
    """The GitHub webhook secret of one repository (``owner/repo``) or one organization
    (``owner``: an organization webhook), derived from the aggregator's webhook secret: a
    secret signs events for its own scope only, and none is stored anywhere."""
    return hmac.new(master.encode(), f"github-webhook:{scope}".encode(), hashlib.sha256).hexdigest()


FORM = "application/x-www-form-urlencoded"


def github_payload(body: bytes, content_type: str | None) -> bytes:
    """The JSON a GitHub webhook delivery carries, in either content type its form offers: the body
    itself (``application/json``), or its ``payload`` field (``application/x-www-form-urlencoded``,
    the form's default). The signature is checked over the body as sent, never over this."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind == FORM or (not kind and body.startswith(b"payload=")):
        from urllib.parse import parse_qs

        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=10)
        if len(fields.get("payload", [])) == 1:
            return fields["payload"][0].encode()
    elif kind in ("", "application/json"):
        return body
    raise Unsupported(
        f"the webhook body is not what GitHub sends (Content-Type {kind or 'none'!r}): set the webhook's Content "
        "type to application/json or application/x-www-form-urlencoded (GitHub's default, a payload field)"
    )


def check_github_signature(body: bytes, payload: bytes, presented: str | None, master: str | None) -> str:
    """The project a GitHub webhook delivery is about (named in its ``payload``: ``github_payload``),
    once its signature over the ``body`` as sent is checked with that repository's (or its
    organization's) secret. Whatever project the body names, only that project's secret can have
    signed it."""
    if not master:
        raise Forbidden("the aggregator has no webhook secret configured: webhooks are refused")
    if not presented:
        raise Unauthorized("missing X-Hub-Signature-256 header: sign the body with HMAC-SHA256")
    try:
        found = json.loads(payload)
        project = str((found.get("repository") or {}).get("full_name") or found["organization"]["login"])
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Unauthorized("the webhook body names no repository (repository.full_name) nor organization") from None
    scopes = (project, project.rsplit("/", 1)[0]) if "/" in project else (project,)
    if not any(
        hmac.compare_digest(presented.encode(), signature(github_webhook_secret(master, s), body).encode())
        for s in scopes
    ):
        raise Unauthorized(
            f"the X-Hub-Signature-256 signature is not that of {project}'s webhook secret "
            f"(codspeed-aggregator webhook-secret --project {project})"
        )
    return project


def check_fresh(timestamp: int, now: float, max_age: int = SIGNATURE_MAX_AGE) -> None:
    if abs(now - timestamp) > max_age:
        raise Unauthorized(
            f"the signed timestamp is more than {max_age // 60} minutes away from now: refused as a replay"
        )


# -- signed links to run pages ----------------------------------------------------------


def page_key(master: str) -> bytes:
    """The key that signs run pages' links, derived from the webhook secret: nothing more to store."""
    return hmac.new(master.encode(), b"run-page-links", hashlib.sha256).digest()


def page_signature(key: bytes, project: str, run_id: str, expires: int) -> str:
    """A link's signature: over the project, the run (empty for the project's list of runs) and the expiry."""
    return hmac.new(key, f"{project}\n{run_id}\n{expires}".encode(), hashlib.sha256).hexdigest()


def signed_query(key: bytes, project: str, run_id: str, expires: int) -> str:
    return f"expires={expires}&sig={page_signature(key, project, run_id, expires)}"


def signed_for(key: bytes | None, project: str, run_id: str, expires: str | None, sig: str | None) -> bool:
    """Whether a link's signature is that of this page (expired or not)."""
    if not key or not sig or not expires or not expires.isdigit():
        return False
    return hmac.compare_digest(sig.encode(), page_signature(key, project, run_id, int(expires)).encode())


def check_page_link(
    key: bytes | None, project: str, run_id: str, expires: str | None, sig: str | None, now: float
) -> None:
    """A run page's link: 401 without a signature, 403 when it is altered, expired or another run's."""
    if not sig:
        raise Unauthorized("this page needs a signed link (the run's page_url) or a project token")
    if key is None:
        raise Forbidden("the aggregator has no webhook secret configured: it signs no page links")
    if not expires or not expires.isdigit():
        raise Forbidden("the link's expiry is not a number: the link was altered")
    if not signed_for(key, project, run_id, expires, sig):
        raise Forbidden("the link's signature does not match this page: it was altered or is another run's")
    if int(expires) < now:
        raise Forbidden("the link expired: take a fresh one from the run's report (page_url)")
