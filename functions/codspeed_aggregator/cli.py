"""The ``codspeed-aggregator`` command: the local stack, the demo, the offline merge, and the
operator's tools. Every failure is one sentence on stderr and an exit code: 2 usage, 3
configuration or environment (AWS settings, a secret, a port), 5 nothing to act on, 7 a bad file."""

import argparse
import errno
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from . import operator_commands
from .failure import CONFIG, EXIT_CODES, USAGE, Failure, aws_failure


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535; 0 picks a free one)")
    return int(text)


def _seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return int(text)


def _positive(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} (1 or more)")
        return int(text)

    return parse


def _url(text: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http(s):// URL")
    return text


def _folder(text: str) -> str:
    from pathlib import Path

    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder: give a folder for the stand-in's uploads")
    return text


def _header_token(text: str) -> str:
    if not re.fullmatch(r"[\x21-\x7e]+", text):  # the client refuses such a token before any request
        raise argparse.ArgumentTypeError(
            "the token holds a space, a control or a non-ASCII character, which an HTTP "
            "header cannot carry: printable ASCII only"
        )
    return text


def _port_free(port: int) -> None:
    """Refuse a busy port at once, not after the whole stack started (moto's server takes seconds)."""
    import socket

    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise Failure(
                f"cannot listen on port {port} ({exc.strerror}): pick another with --port, or --port 0 for a free one",
                CONFIG,
            ) from None


def _local(args: argparse.Namespace) -> NoReturn:
    from codspeed_local.stack import LocalStack

    _port_free(args.port)

    stack = LocalStack(
        port=args.port,
        token=args.token,
        upstream_url=args.upstream_url,
        upstream_dir=args.upstream_dir,
        deadline_seconds=args.deadline,
        webhook_secret=args.webhook_secret,
        env={"FORWARD_MODE": args.forward_mode},
        event_delay=args.event_delay,
        sweep_every=min(5.0, args.deadline / 2) if args.deadline else 5.0,
        log=lambda line: print(line, flush=True),
    )
    try:
        stack.start()
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise Failure(
                f"cannot listen on port {args.port} ({exc.strerror}): pick another with --port, "
                "or --port 0 for a free one",
                CONFIG,
            ) from None
        raise
    import signal
    import time

    try:
        # before "Ctrl-C stops it." is said: a SIGINT sent on reading it must find the handler in place
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops it as cleanly as Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C too, started in the background
        print(f"API URL:  {stack.api_url}")
        print(f"token:    {stack.token}")
        kept = "kept there" if args.upstream_dir else "removed when this stops; keep them with --upstream-dir"
        print(f"upstream: {args.upstream_url or f'stand-in, uploads in {stack.upstream_dir} ({kept})'}")
        print("state:    in memory: stopping this forgets every run")
        print(
            f"try:      CODSPEED_AGGREGATOR_URL={stack.api_url} CODSPEED_AGGREGATOR_TOKEN={stack.token} "
            "codspeed-client push --shard 1/2 ..."
        )
        print("Ctrl-C stops it.", flush=True)
        while True:  # not one endless wait: a signal one of the stack's threads took is raised here within 0.2 s
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        stack.stop()
    # Now: an invocation its pollers left under way (after 10 s) would hold the interpreter's exit
    # (its thread pools are joined), retrying calls to servers that are gone. Its runs were in memory.
    sys.stdout.flush()
    os._exit(0)


def _demo(args: argparse.Namespace) -> int:
    from codspeed_local.demo import run_demo

    return run_demo()


def _merge(args: argparse.Namespace) -> int:
    from .offline import merge_files

    return merge_files(args.bundles, args.output)


def _sample_profiles(args: argparse.Namespace) -> int:
    from pathlib import Path

    from codspeed_local.profiles import make_profile_folder

    folder = Path(args.folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise Failure(f"{folder} exists and is not an empty folder: give a new one", USAGE)
    make_profile_folder(folder, args.pid, [f"tests/test_sample.py::test_bench_{i}" for i in range(args.benchmarks)])
    print(
        f"made {folder}: {args.pid}.out with {args.benchmarks} benchmarks, as pytest-codspeed leaves a profile folder"
    )
    return 0


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="codspeed-aggregator", description="Run the shard aggregator locally, or merge offline.", epilog=EXIT_CODES
    )
    try:
        release = version("codspeed-shard-aggregator")
    except PackageNotFoundError:
        release = "unknown"
    root.add_argument("--version", action="version", version=f"codspeed-aggregator {release}")
    commands = root.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, example: str, **kwargs: Any) -> argparse.ArgumentParser:
        return commands.add_parser(
            name,
            help=help,
            epilog=f"example:\n  {example}\n\n{EXIT_CODES}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **kwargs,
        )

    local = command(
        "local",
        "run the whole aggregator on this machine (no Docker)",
        "codspeed-aggregator local --port 8787 --token mytoken",
        description="Run the whole aggregator on this machine: moto's server for S3, SQS and DynamoDB, a local "
        "API gateway, the handlers, and a stand-in upstream. Runs live in memory: stopping it forgets "
        "every run (the stand-in's uploads stay in their folder). Its S3 checks no signature, expiry "
        "or checksum of an upload URL; on AWS, S3 does.",
    )
    local.add_argument("--port", type=_port, default=8787, help="API port (default 8787; 0 picks a free one)")
    local.add_argument("--token", type=_header_token, help="API token (default: a random one, printed)")
    upstream = local.add_mutually_exclusive_group()
    upstream.add_argument("--upstream-url", type=_url, help="forward to this upload endpoint instead of the stand-in")
    upstream.add_argument("--upstream-dir", type=_folder, help="where the stand-in upstream keeps uploads")
    local.add_argument(
        "--deadline", type=_positive("a number of seconds"), help="close open runs after this many seconds"
    )
    local.add_argument("--webhook-secret", help="HMAC secret of /webhooks/refresh and /webhooks/github")
    local.add_argument(
        "--forward-mode",
        choices=("parts", "one-upload"),
        default="parts",
        help="parts (default): each shard upstream as its own run part when it is counted; one-upload: "
        "a run at its end",
    )
    local.add_argument(
        "--event-delay",
        type=_seconds,
        default=0.0,
        help="hold each bundle's S3 event this many seconds before it is counted, as AWS delivers it seconds "
        "after the PUT (default 0: at once)",
    )
    local.set_defaults(run=_local)
    demo = command("demo", "a three-shard run through the local stack, shown step by step", "codspeed-aggregator demo")
    demo.set_defaults(run=_demo)
    sample = command(
        "sample-profiles",
        "make a small CodSpeed profile folder to push by hand",
        "codspeed-aggregator sample-profiles profiles/",
    )
    sample.add_argument("folder", help="the folder to make (new, or empty)")
    sample.add_argument("--pid", type=_positive("a pid"), default=4242, help="the profile's pid (default 4242)")
    sample.add_argument(
        "--benchmarks", type=_positive("a number of benchmarks"), default=3, help="how many benchmarks (default 3)"
    )
    sample.set_defaults(run=_sample_profiles)
    merge = command(
        "merge",
        "merge shard bundles into one upload archive, offline",
        "codspeed-aggregator merge shard-1.tar.gz shard-2.tar.gz -o merged.tar.gz",
    )
    merge.add_argument("bundles", nargs="+", help="shard bundles (tar.gz of a profile folder)")
    merge.add_argument("-o", "--output", required=True, help="the merged tar.gz")
    merge.set_defaults(run=_merge)
    again = command(
        "redrive",
        "retry the forwards, or the arrivals, that failed every try (from their dead-letter queue)",
        "codspeed-aggregator redrive --dead-letter-url $DLQ_URL --queue-url $QUEUE_URL",
    )
    again.add_argument(
        "--queue",
        choices=("finalize", "arrivals"),
        default="finalize",
        help="finalize (default): failed forwards; arrivals: bundles whose arrival failed every retry",
    )
    again.add_argument(
        "--dead-letter-url", help="the queue's dead-letter queue (env FINALIZE_DLQ_URL, ARRIVALS_DLQ_URL)"
    )
    again.add_argument("--queue-url", help="the queue (env FINALIZE_QUEUE_URL, ARRIVALS_QUEUE_URL)")
    again.add_argument(
        "--wait",
        type=_seconds,
        default=120,
        help="seconds to follow SQS's move before leaving it to go on (default 120; 0: do not wait)",
    )
    again.set_defaults(run=operator_commands.redrive)
    token = command(
        "token",
        "create or revoke a per-project token (uses TABLE_NAME and AWS settings)",
        "TABLE_NAME=<TableName> codspeed-aggregator token create --project acme/widgets",
    )
    token.add_argument("action", choices=("create", "revoke"))
    token.add_argument("--project", help="owner/repo the token may touch (create)")
    token.add_argument("--token", help="the token to revoke (revoke)")
    token.set_defaults(run=operator_commands.token)
    secret = command(
        "webhook-secret",
        "the secret of one repository's (or organization's) GitHub webhook",
        "codspeed-aggregator webhook-secret --project acme/widgets",
    )
    scope = secret.add_mutually_exclusive_group(required=True)
    scope.add_argument("--project", help="owner/repo: a repository webhook")
    scope.add_argument("--owner", help="an organization webhook, for all its repositories")
    secret.set_defaults(run=operator_commands.webhook_secret)
    check = command(
        "webhook-check",
        "send a GitHub webhook's ping as GitHub does (form-encoded, signed): what Recent Deliveries will show",
        "codspeed-aggregator webhook-check --url https://<ApiUrl>/webhooks/github --project acme/widgets",
    )
    check.add_argument(
        "--url", required=True, help="the webhook's Payload URL: the stack's ApiUrl and /webhooks/github"
    )
    scope = check.add_mutually_exclusive_group(required=True)
    scope.add_argument("--project", help="owner/repo: a repository webhook")
    scope.add_argument("--owner", help="an organization webhook, for all its repositories")
    check.set_defaults(run=operator_commands.webhook_check)
    refresh = command(
        "refresh-event",
        "print a POST /webhooks/refresh event signed now, for sam local invoke",
        "codspeed-aggregator refresh-event --project acme/widgets --run-id 7044765741 > refresh.json",
    )
    refresh.add_argument("--project", required=True, help="owner/repo of the run")
    refresh.add_argument("--run-id", required=True, help="the run whose report to publish again")
    refresh.add_argument("--webhook-secret", help="the stack's webhook secret (default: WEBHOOK_SECRET)")
    refresh.set_defaults(run=operator_commands.refresh_event)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except Failure as exc:
        print(f"codspeed-aggregator: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        failed = aws_failure(exc)
        if failed is None:
            raise
        print(f"codspeed-aggregator: {failed}", file=sys.stderr)
        return failed.code


if __name__ == "__main__":
    sys.exit(main())
