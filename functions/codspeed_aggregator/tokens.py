"""``codspeed-aggregator token``: per-project tokens. Only a digest is stored; the token is shown once."""

import secrets
from datetime import datetime, timezone

from .auth import token_digest


def create(ledger, project: str) -> str:
    token = f"cst_{secrets.token_urlsafe(32)}"
    ledger.put_token(token_digest(token), project, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return token


def revoke(ledger, token: str) -> bool:
    return ledger.delete_token(token_digest(token))
