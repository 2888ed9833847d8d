"""Who may call what, case by case, over real HTTP. Shared by tests/e2e/test_auth.py and bench/load.py."""

import json
import time
import uuid

import requests

from codspeed_aggregator.auth import signature


def _get(stack, token, project, run_id="r1") -> requests.Response:
    headers = {"Authorization": token} if token is not None else {}
    return requests.get(f"{stack.api_url}/v1/runs/{project}/{run_id}", headers=headers, timeout=10)


def _signed(stack, secret, body: dict, tamper: bool = False) -> requests.Response:
    raw = json.dumps(body).encode()
    headers = {"X-Hub-Signature-256": signature(secret, raw)} if secret else {}
    sent = raw.replace(b'"r1"', b'"r2"') if tamper else raw
    return requests.post(f"{stack.api_url}/webhooks/refresh", data=sent, headers=headers, timeout=10)


def cases(stack, tokens, webhook_secret: str) -> list[tuple[str, callable, int]]:
    """``tokens``: the stack's ProjectTokens use case (the operator's ``token`` command)."""
    project, other = f"acme/auth-{uuid.uuid4().hex[:6]}", f"acme/auth-other-{uuid.uuid4().hex[:6]}"
    token = tokens.create(project)
    revoked = tokens.create(project)
    tokens.revoke(revoked)
    refresh = {"project": project, "run_id": "r1", "timestamp": int(time.time())}
    return [
        ("no token", lambda: _get(stack, None, project), 401),
        ("a wrong token", lambda: _get(stack, "not-a-token", project), 403),
        ("an empty token", lambda: _get(stack, "", project), 401),
        ("the operator token, any project", lambda: _get(stack, stack.token, other), 404),
        ("the operator token as a Bearer", lambda: _get(stack, f"Bearer {stack.token}", other), 404),
        ("a project token, its project", lambda: _get(stack, token, project), 404),
        ("a project token, another project", lambda: _get(stack, token, other), 403),
        ("a revoked project token", lambda: _get(stack, revoked, project), 403),
        (
            "a project token with one character changed",
            lambda: _get(stack, token[:-1] + ("A" if token[-1] != "A" else "B"), project),
            403,
        ),
        ("a webhook without a signature", lambda: _signed(stack, None, refresh), 401),
        ("a webhook signed with the wrong secret", lambda: _signed(stack, "wrong", refresh), 401),
        ("a webhook whose body was changed", lambda: _signed(stack, webhook_secret, refresh, tamper=True), 401),
        (
            "a webhook replayed after 10 minutes",
            lambda: _signed(stack, webhook_secret, {**refresh, "timestamp": int(time.time()) - 600}),
            401,
        ),
        (
            "a webhook carrying a token but no signature",
            lambda: requests.post(
                f"{stack.api_url}/webhooks/refresh", json=refresh, headers={"Authorization": stack.token}, timeout=10
            ),
            401,
        ),
    ]
