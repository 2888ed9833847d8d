"""The ``codspeed-aggregator`` command: the local stack, the demo, and the offline merge."""

import argparse
import sys


def _local(args: argparse.Namespace) -> int:
    from .local.stack import LocalStack

    stack = LocalStack(
        port=args.port, token=args.token, upstream_url=args.upstream_url, upstream_dir=args.upstream_dir,
        deadline_seconds=args.deadline, webhook_secret=args.webhook_secret, sweep_every=min(5.0, args.deadline / 2) if args.deadline else 5.0,
    )
    with stack:
        print(f"API URL:  {stack.api_url}")
        print(f"token:    {stack.token}")
        print(f"upstream: {args.upstream_url or f'stand-in, uploads kept in {stack.upstream_dir}'}")
        print("state:    in memory: stopping this forgets every run")
        print(f"try:      CODSPEED_AGGREGATOR_URL={stack.api_url} CODSPEED_AGGREGATOR_TOKEN={stack.token} codspeed-client push --shard 1/2 ...")
        print("Ctrl-C stops it.", flush=True)
        try:
            import threading

            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .local.demo import run_demo

    return run_demo()


def _merge(args: argparse.Namespace) -> int:
    from .offline import merge_files

    return merge_files(args.bundles, args.output)


def _redrive(args: argparse.Namespace) -> int:
    import os

    from .adapters.aws import client
    from .redrive import redrive

    dead_letter = args.dead_letter_url or os.environ.get("FINALIZE_DLQ_URL")
    queue = args.queue_url or os.environ.get("FINALIZE_QUEUE_URL")
    if not dead_letter or not queue:
        print("codspeed-aggregator: give --dead-letter-url and --queue-url (the stack's FinalizeDeadLetterQueueUrl "
              "and FinalizeQueue outputs), or set FINALIZE_DLQ_URL and FINALIZE_QUEUE_URL", file=sys.stderr)
        return 2
    moved = redrive(client("sqs"), dead_letter, queue)
    print(f"redrove {moved} finalize message{'s' if moved != 1 else ''} to {queue}")
    return 0


def _token(args: argparse.Namespace) -> int:
    from pydantic import TypeAdapter, ValidationError

    from codspeed_wire.names import Project

    from . import tokens
    from .wiring import aggregator

    ledger = aggregator().ledger
    if args.action == "create":
        try:
            TypeAdapter(Project).validate_python(args.project or "")
        except ValidationError:
            print(f"codspeed-aggregator: --project {args.project!r} is not owner/repo", file=sys.stderr)
            return 2
        print(tokens.create(ledger, args.project))
        return 0
    if not args.token:
        print("codspeed-aggregator: token revoke needs --token", file=sys.stderr)
        return 2
    if not tokens.revoke(ledger, args.token):
        print("codspeed-aggregator: no such token", file=sys.stderr)
        return 1
    print("revoked")
    return 0


def _webhook_secret(args: argparse.Namespace) -> int:
    from .auth import github_webhook_secret
    from .wiring import webhook_secret

    master = webhook_secret()
    if not master:
        print("codspeed-aggregator: no webhook secret: set WEBHOOK_SECRET, or WEBHOOK_SECRET_PARAMETER and AWS "
              "settings (the stack's WebhookSecretParameter)", file=sys.stderr)
        return 3
    print(github_webhook_secret(master, args.project or args.owner))
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="codspeed-aggregator", description="Run the shard aggregator locally, or merge offline.")
    commands = root.add_subparsers(dest="command", required=True)
    local = commands.add_parser(
        "local", help="run the whole aggregator on this machine (no Docker)",
        description="Run the whole aggregator on this machine: moto's server for S3, SQS and DynamoDB, a local "
                    "API gateway, the handlers, and a stand-in upstream. Runs live in memory: stopping it forgets "
                    "every run (the stand-in's uploads stay in their folder). Its S3 checks no signature, expiry "
                    "or checksum of an upload URL; on AWS, S3 does.")
    local.add_argument("--port", type=int, default=8787, help="API port (default 8787; 0 picks a free one)")
    local.add_argument("--token", help="API token (default: a random one, printed)")
    upstream = local.add_mutually_exclusive_group()
    upstream.add_argument("--upstream-url", help="forward to this upload endpoint instead of the stand-in")
    upstream.add_argument("--upstream-dir", help="where the stand-in upstream keeps uploads")
    local.add_argument("--deadline", type=int, help="close open runs after this many seconds")
    local.add_argument("--webhook-secret", help="HMAC secret of /webhooks/refresh and /webhooks/github")
    local.set_defaults(run=_local)
    demo = commands.add_parser("demo", help="a three-shard run through the local stack, shown step by step")
    demo.set_defaults(run=_demo)
    merge = commands.add_parser("merge", help="merge shard bundles into one upload archive, offline")
    merge.add_argument("bundles", nargs="+", help="shard bundles (tar.gz of a profile folder)")
    merge.add_argument("-o", "--output", required=True, help="the merged tar.gz")
    merge.set_defaults(run=_merge)
    again = commands.add_parser("redrive", help="retry the forwards that failed every try (from the dead-letter queue)")
    again.add_argument("--dead-letter-url", help="the finalize dead-letter queue (env FINALIZE_DLQ_URL)")
    again.add_argument("--queue-url", help="the finalize queue (env FINALIZE_QUEUE_URL)")
    again.set_defaults(run=_redrive)
    token = commands.add_parser("token", help="create or revoke a per-project token (uses TABLE_NAME and AWS settings)")
    token.add_argument("action", choices=("create", "revoke"))
    token.add_argument("--project", help="owner/repo the token may touch (create)")
    token.add_argument("--token", help="the token to revoke (revoke)")
    token.set_defaults(run=_token)
    secret = commands.add_parser("webhook-secret", help="the secret of one repository's (or organization's) GitHub webhook")
    scope = secret.add_mutually_exclusive_group(required=True)
    scope.add_argument("--project", help="owner/repo: a repository webhook")
    scope.add_argument("--owner", help="an organization webhook, for all its repositories")
    secret.set_defaults(run=_webhook_secret)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
