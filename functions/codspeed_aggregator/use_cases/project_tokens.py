"""Per-project API tokens (``codspeed-aggregator token``), and whose a presented one is. Only a
digest is stored; the token is shown once."""

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.ledger import Tokens
from ..auth import token_digest
from ..domain.timestamps import iso


@dataclass
class ProjectTokens:
    tokens: Tokens  # DynamoDB: token items
    clock: Callable[[], float] = time.time

    def create(self, project: str) -> str:
        token = f"cst_{secrets.token_urlsafe(32)}"
        self.tokens.put_token(token_digest(token), project, iso(self.clock()).replace("Z", "+00:00"))
        return token

    def revoke(self, token: str) -> bool:
        return self.tokens.delete_token(token_digest(token))

    def project_of(self, digest: str) -> str | None:
        """The project a token's digest was made for, or None."""
        return self.tokens.token_project(digest)
