"""CI jobs' OIDC tokens, as CodSpeed's runner sends them (``Authorization: <JWT>``, asked for with
audience ``codspeed.io``): GitHub Actions' (one issuer; the ``repository`` claim) and CircleCI's
(an issuer per organization, the ones the operator lists; the ``oidc.circleci.com/vcs-origin``
claim, ``github.com/owner/repo``). Each is verified against its issuer's published keys."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ..domain.errors import OidcRefused

if TYPE_CHECKING:  # loaded when a JWT is presented only
    from jwt import PyJWKClient


GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
CIRCLECI_ISSUERS = "https://oidc.circleci.com/org"  # then /<organization id>
CIRCLECI_ORIGIN = "oidc.circleci.com/vcs-origin"


class _Issuer:
    """One issuer: its keys (fetched once an hour at most), its audience, and the claim naming the project."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        jwks_url: str,
        claim: str,
        project: Callable[[str], str | None],
        cache_seconds: int = 3600,
    ) -> None:
        self.issuer, self.audience, self.jwks_url, self.claim, self.project = issuer, audience, jwks_url, claim, project
        self.cache_seconds = cache_seconds
        self._keys: PyJWKClient | None = None
        self._lock = threading.Lock()

    def _key_client(self) -> PyJWKClient:
        with self._lock:
            if self._keys is None:
                import jwt  # only when a JWT is presented: static tokens never load it

                self._keys = jwt.PyJWKClient(self.jwks_url, cache_jwk_set=True, lifespan=self.cache_seconds, timeout=10)
            return self._keys

    def repository(self, token: str) -> str:
        """The project the token was issued to, once its signature, issuer, audience and expiry are checked."""
        import jwt

        try:
            key = self._key_client().get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud", self.claim]},
                leeway=30,
            )
        except jwt.ExpiredSignatureError as exc:
            raise OidcRefused("the OIDC token has expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise OidcRefused(f"the OIDC token is not for audience {self.audience!r}") from exc
        except jwt.InvalidIssuerError as exc:
            raise OidcRefused(f"the OIDC token was not issued by {self.issuer}") from exc
        except jwt.InvalidSignatureError as exc:
            raise OidcRefused(f"the OIDC token's signature does not verify against {self.issuer}'s keys") from exc
        except jwt.PyJWKClientError as exc:
            raise OidcRefused(f"the OIDC token's signing key is not among {self.issuer}'s keys ({exc})") from exc
        except jwt.InvalidTokenError as exc:
            raise OidcRefused(f"the OIDC token is invalid ({exc})") from exc
        project = self.project(str(claims[self.claim]))
        if project is None:
            raise OidcRefused(f"the OIDC token's {self.claim} claim {claims[self.claim]!r} names no owner/repo")
        return project


def _vcs_origin(origin: str) -> str | None:
    """``github.com/owner/repo`` (CircleCI's ``vcs-origin``) as ``owner/repo``."""
    host, _, path = origin.partition("/")
    return path if "." in host and path.count("/") >= 1 else None


class CiOidc:
    """The issuers a token may come from: GitHub Actions', and CircleCI's of the organizations listed."""

    def __init__(
        self,
        audience: str,
        jwks_url: str | None = None,
        circleci_orgs: Collection[str] = (),
        circleci_issuers: str = CIRCLECI_ISSUERS,
        circleci_jwks_url: str | None = None,
    ) -> None:
        self.github = _Issuer(
            GITHUB_ISSUER,
            audience,
            jwks_url or f"{GITHUB_ISSUER}/.well-known/jwks",
            "repository",
            lambda repository: repository,
        )
        self.circleci = {}
        for org in circleci_orgs:
            issuer = f"{circleci_issuers.rstrip('/')}/{org}"
            jwks = (circleci_jwks_url or "{issuer}/.well-known/jwks-pub.json").format(issuer=issuer, org=org)
            self.circleci[issuer] = _Issuer(issuer, audience, jwks, CIRCLECI_ORIGIN, _vcs_origin)
        self.circleci_issuers = circleci_issuers.rstrip("/")

    def repository(self, token: str) -> str:
        """The project a CI job's token names, verified by the issuer it says it comes from."""
        import jwt

        try:
            issuer = str(jwt.decode(token, options={"verify_signature": False}).get("iss") or "")
        except jwt.InvalidTokenError as exc:
            raise OidcRefused(f"the OIDC token is invalid ({exc})") from exc
        if issuer in self.circleci:
            return self.circleci[issuer].repository(token)
        if issuer.startswith(f"{self.circleci_issuers}/"):
            raise OidcRefused(
                f"the OIDC token's CircleCI organization ({issuer.rsplit('/', 1)[1]}) is not among the "
                "aggregator's CircleCiOrgIds: its operator adds it to accept the organization's jobs"
            )
        return self.github.repository(token)
