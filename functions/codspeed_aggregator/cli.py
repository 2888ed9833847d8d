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
        print(f"try:      CODSPEED_AGGREGATOR_URL={stack.api_url} CODSPEED_TOKEN={stack.token} codspeed-client push --shard 1/2 ...")
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

    return merge_files(args.bundles, args.output, keep_logs=args.keep_logs)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="codspeed-aggregator", description="Run the shard aggregator locally, or merge offline.")
    commands = root.add_subparsers(dest="command", required=True)
    local = commands.add_parser("local", help="run the whole aggregator on this machine (no Docker)")
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
    merge.add_argument("--keep-logs", action="store_true", help="keep runner and valgrind logs, renamed per shard")
    merge.set_defaults(run=_merge)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
