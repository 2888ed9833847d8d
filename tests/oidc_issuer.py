"""A stand-in for GitHub Actions' OIDC issuer: a key pair made here, its public key served as
a JWKS on loopback (what the aggregator fetches), and tokens shaped like the ones a job gets
with ``id-token: write`` (claims ``repository``, ``repository_owner``, ``run_id``, ...)."""

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from codspeed_local.serving import serve_in_thread, stop_serving

ISSUER = "https://token.actions.githubusercontent.com"


class OidcIssuer:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}]}).encode()
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                self.send_response(
                    200 if self.path.endswith(("/.well-known/jwks", "/.well-known/jwks-pub.json")) else 404
                )
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.server)

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks"

    def token(
        self,
        repository: str,
        *,
        audience: str = "codspeed.io",
        issuer: str = ISSUER,
        expires_in: int = 300,
        key=None,
        kid: str | None = None,
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience,
            "sub": f"repo:{repository}:ref:refs/heads/main",
            "repository": repository,
            "repository_owner": repository.split("/")[0],
            "ref": "refs/heads/main",
            "run_id": "7044765741",
            "iat": now,
            "nbf": now - 5,
            "exp": now + expires_in,
        }
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def circleci_token(self, org: str, origin: str, *, audience: str = "codspeed.io", expires_in: int = 300) -> str:
        """A CircleCI job's token (``circleci run oidc get --claims '{"aud": "codspeed.io"}'``): its
        organization's issuer, the project as ``oidc.circleci.com/vcs-origin`` (``github.com/owner/repo``)."""
        now = int(time.time())
        claims = {
            "iss": f"https://oidc.circleci.com/org/{org}",
            "aud": audience,
            "sub": f"org/{org}/project/p/user/u",
            "oidc.circleci.com/project-id": "p",
            "oidc.circleci.com/vcs-origin": origin,
            "oidc.circleci.com/vcs-ref": "refs/heads/main",
            "iat": now,
            "nbf": now - 5,
            "exp": now + expires_in,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})

    def stop(self) -> None:
        stop_serving(self.server)
