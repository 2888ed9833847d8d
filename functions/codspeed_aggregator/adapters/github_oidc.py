"""GitHub Actions OIDC tokens, as CodSpeed's runner sends them (``Authorization: <JWT>``,
requested with ``audience=codspeed.io``): verified against the issuer's published keys."""

import threading


class OidcRefused(Exception):
    """The token is not a valid OIDC token of this issuer and audience; the message says why."""


class GitHubOidc:
    ISSUER = "https://token.actions.githubusercontent.com"

    def __init__(self, audience: str, issuer: str = ISSUER, jwks_url: str | None = None, cache_seconds: int = 3600) -> None:
        self.audience = audience
        self.issuer = issuer
        self.jwks_url = jwks_url or f"{issuer}/.well-known/jwks"
        self.cache_seconds = cache_seconds
        self._keys = None
        self._lock = threading.Lock()

    def _key_client(self):
        with self._lock:
            if self._keys is None:
                import jwt  # only when a JWT is presented: static tokens never load it

                self._keys = jwt.PyJWKClient(self.jwks_url, cache_jwk_set=True, lifespan=self.cache_seconds, timeout=10)
            return self._keys

    def repository(self, token: str) -> str:
        """The ``owner/repo`` the token was issued to, once its signature, issuer, audience and
        expiry are checked."""
        import jwt

        try:
            key = self._key_client().get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=self.audience, issuer=self.issuer,
                                options={"require": ["exp", "iss", "aud", "repository"]}, leeway=30)
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
        return str(claims["repository"])
