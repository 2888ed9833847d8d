"""The operator's commands of ``codspeed-aggregator`` against a deployed stack: project tokens,
a GitHub webhook's secret, a signed refresh event, the finalize queue's redrive. Each failure is a
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


def webhook_secret(args: argparse.Namespace) -> int:
    from codspeed_rules.names import OWNER_PATTERN, has_dot_segment, is_project

    from .adapters.aws import OPERATOR
    from .auth import github_webhook_secret
    from .wiring import webhook_secret

    if args.project is not None and not is_project(args.project):
        raise Failure(f"--project {args.project!r} is not owner/repo (or group/subgroup/repo)", USAGE)
    if args.owner is not None and (not re.fullmatch(OWNER_PATTERN, args.owner) or has_dot_segment(args.owner)):
        raise Failure(f"--owner {args.owner!r} is not an organization or user name", USAGE)
    master = webhook_secret(OPERATOR)
    if not master:
        raise Failure(
            "no webhook secret: set WEBHOOK_SECRET, or WEBHOOK_SECRET_PARAMETER and AWS settings "
            "(the stack's WebhookSecretParameter)",
            CONFIG,
        )
    print(github_webhook_secret(master, args.project or args.owner))
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
