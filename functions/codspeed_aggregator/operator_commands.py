"""The operator's commands of ``codspeed-aggregator`` against a deployed stack: project tokens,
a GitHub webhook's secret and a check of it, a signed refresh event, the finalize queue's redrive. Each failure is a
``Failure``: one sentence and its exit code."""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from typing import TYPE_CHECKING

from .failure import CONFIG, NOTHING, USAGE, Failure

if TYPE_CHECKING:
    from .use_cases.project_tokens import ProjectTokens


def project_tokens() -> ProjectTokens:
    """The deployed stack's project tokens, or a Failure saying what configuration is missing."""
    from .settings import settings
    from .wiring import for_operator

    if not settings().table_name:
        raise Failure(
            "no table: set TABLE_NAME to the stack's TableName output (and the usual AWS credentials and region)",
            CONFIG,
        )
    return for_operator().project_tokens  # no credentials, no region: said by the command line (aws_failure)


def redrive(args: argparse.Namespace) -> int:
    from .adapters.aws import client
    from .redrive import redrive

    kind = args.queue  # "finalize" (failed forwards) or "arrivals" (bundles whose arrival failed)
    prefix, outputs = {
        "finalize": ("FINALIZE", "FinalizeDeadLetterQueueUrl and FinalizeQueueUrl"),
        "arrivals": ("ARRIVALS", "ArrivalsDeadLetterQueueUrl and ArrivalsQueueUrl"),
    }[kind]
    dead_letter = args.dead_letter_url or os.environ.get(f"{prefix}_DLQ_URL")
    queue = args.queue_url or os.environ.get(f"{prefix}_QUEUE_URL")
    if not dead_letter or not queue:
        raise Failure(
            f"give --dead-letter-url and --queue-url (the stack's {outputs} outputs), or set {prefix}_DLQ_URL "
            f"and {prefix}_QUEUE_URL",
            USAGE,
        )
    from botocore.exceptions import ClientError

    try:
        task = redrive(client("sqs"), dead_letter, queue, wait_seconds=args.wait)
    except ClientError as exc:  # no credentials, AWS out of reach: said by the command line (failure.aws_failure)
        raise Failure(f"SQS refused the redrive: {exc}", CONFIG) from None
    if task.status == "FAILED":
        raise Failure(
            f"the redrive failed after moving {task.moved} of {task.to_move} messages: {task.failure}", CONFIG
        )
    plural = "s" if task.to_move != 1 else ""
    if task.status == "RUNNING":
        print(f"redriving {task.to_move} {kind} message{plural} to {queue}: {task.moved} moved so far, SQS goes on")
    else:
        print(f"redrove {task.moved} of {task.to_move} {kind} message{plural} to {queue} ({task.status.lower()})")
    return 0


def token(args: argparse.Namespace) -> int:

    from codspeed_rules.names import is_project

    if args.action == "create":
        if args.project is None:
            raise Failure("token create needs --project owner/repo: the project the token may touch", USAGE)
        if not is_project(args.project):
            raise Failure(f"--project {args.project!r} is not owner/repo (or group/subgroup/repo)", USAGE)
    elif not args.token:
        raise Failure("token revoke needs --token", USAGE)
    tokens = project_tokens()
    if args.action == "create":
        print(tokens.create(args.project))
        return 0
    if not tokens.revoke(args.token):
        raise Failure("no such token", NOTHING)
    print("revoked")
    return 0


def _webhook_scope(args: argparse.Namespace) -> str:
    """The repository (``--project``) or organization (``--owner``) a GitHub webhook is for."""
    from codspeed_rules.names import OWNER_PATTERN, has_dot_segment, is_project

    if args.project is not None and not is_project(args.project):
        raise Failure(f"--project {args.project!r} is not owner/repo (or group/subgroup/repo)", USAGE)
    if args.owner is not None and (not re.fullmatch(OWNER_PATTERN, args.owner) or has_dot_segment(args.owner)):
        raise Failure(f"--owner {args.owner!r} is not an organization or user name", USAGE)
    return str(args.project or args.owner)


def _github_webhook_secret(scope: str) -> str:
    from .adapters.aws import OPERATOR
    from .auth import github_webhook_secret
    from .wiring import webhook_secret

    master = webhook_secret(OPERATOR)
    if not master:
        raise Failure(
            "no webhook secret: set WEBHOOK_SECRET, or WEBHOOK_SECRET_PARAMETER and AWS settings "
            "(the stack's WebhookSecretParameter)",
            CONFIG,
        )
    return github_webhook_secret(master, scope)


def webhook_secret(args: argparse.Namespace) -> int:
    print(_github_webhook_secret(_webhook_scope(args)))
    return 0


WEBHOOK_PATH = "/webhooks/github"
_WEBHOOK_ADVICE = {
    401: "the stack at that URL does not know this secret: is WEBHOOK_SECRET_PARAMETER (or WEBHOOK_SECRET) its own?",
    403: "the stack at that URL has no webhook secret: create its WebhookSecretParameter",
    404: f"no webhook there: the Payload URL is the stack's ApiUrl output followed by {WEBHOOK_PATH}",
}


def webhook_check(args: argparse.Namespace) -> int:
    """GitHub's ``ping``, sent to the Payload URL as GitHub sends it with its form's defaults (the body
    ``payload=`` form-encoded, signed with the webhook's secret): what the webhook's Recent Deliveries
    will show for it, checked from the operator's machine before GitHub is set up."""
    import uuid
    from urllib.parse import urlencode

    import requests

    from .auth import FORM, signature

    scope = _webhook_scope(args)
    if not re.fullmatch(rf"https?://[^/\s]+(/[^\s]*)?{WEBHOOK_PATH}", args.url):
        raise Failure(
            f"--url {args.url!r} is no Payload URL: give the stack's ApiUrl output followed by {WEBHOOK_PATH}", USAGE
        )
    secret = _github_webhook_secret(scope)
    named = {"repository": {"full_name": scope}} if "/" in scope else {"organization": {"login": scope}}
    body = urlencode({"payload": json.dumps({"zen": "Keep it logically awesome.", "hook_id": 0, **named})}).encode()
    headers = {
        "Content-Type": FORM,
        "User-Agent": "GitHub-Hookshot/codspeed-aggregator",
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature(secret, body),
    }
    try:
        answer = requests.post(args.url, data=body, headers=headers, timeout=30)
    except requests.RequestException as exc:
        raise Failure(
            f"{args.url} could not be reached ({type(exc).__name__}): is it the stack's ApiUrl output?", CONFIG
        ) from None
    said = f"{args.url} answered {answer.status_code} {answer.text[:300].strip()}"
    if answer.status_code != 200:
        advice = _WEBHOOK_ADVICE.get(answer.status_code, "the answer says why")
        raise Failure(f"{said}: {advice}", CONFIG)
    print(
        f"{said}: GitHub's ping, form-encoded (its default Content type) and signed with {scope}'s webhook secret, "
        "is taken; Recent Deliveries will show the same"
    )
    return 0


def refresh_event(args: argparse.Namespace) -> int:
    """A ``POST /webhooks/refresh`` event signed now: a stored one is refused as a replay five
    minutes after it was signed (events/api-webhook-refresh.json is, always)."""
    from codspeed_local.gateway import http_api_event
    from codspeed_rules.names import is_project, run_id_problem

    from .adapters.aws import OPERATOR
    from .auth import signature
    from .wiring import webhook_secret

    if not is_project(args.project):
        raise Failure(f"--project {args.project!r} is not owner/repo (or group/subgroup/repo)", USAGE)
    if problem := run_id_problem(args.run_id):
        raise Failure(f"--run-id {problem}", USAGE)
    secret = args.webhook_secret or webhook_secret(OPERATOR)
    if not secret:
        raise Failure(
            "no webhook secret: pass --webhook-secret, or set WEBHOOK_SECRET (or WEBHOOK_SECRET_PARAMETER "
            "and AWS settings)",
            CONFIG,
        )
    body = json.dumps({"project": args.project, "run_id": args.run_id, "timestamp": int(time.time())}).encode()
    headers = {"content-type": "application/json", "x-hub-signature-256": signature(secret, body)}
    print(json.dumps(http_api_event("POST", "/webhooks/refresh", headers, body), indent=2))
    return 0
