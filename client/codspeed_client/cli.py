"""The ``codspeed-client`` command: its parser, built from the commands' modules, and ``main``.
Each command imports what it sends with when it runs, so ``--help`` starts fast."""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .commands import COMMANDS
from .errors import OK, ClientError, Skipped

EXIT_CODES = """\
exit codes: 0 done; 2 usage; 3 configuration missing; 4 token refused; 5 request refused
(conflict, invalid, run already final); 6 network or aggregator failure; 7 bad input
(folder, archive); status --wait: 10 forward failed, 11 shards missing or nothing sent,
12 timed out, 14 a benchmark measured in more than one shard (unless --allow-overlaps);
status --fail-on-regression: 13 a benchmark regressed past the threshold.
"""


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="codspeed-client",
        description="Push CodSpeed benchmark shards to the shard aggregator.",
        epilog="examples:\n" + "".join(command.EXAMPLE for command in COMMANDS) + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--version", action="version", version=f"codspeed-client {__version__}")
    # the usage line (and the error of a command line without one) names every command
    subcommands = root.add_subparsers(
        dest="command", required=True, metavar="{" + ",".join(command.NAME for command in COMMANDS) + "}"
    )
    for command in COMMANDS:
        sub = subcommands.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.HELP,
            epilog="example:\n" + command.EXAMPLE + "\n" + EXIT_CODES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(run=command.run)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except ClientError as exc:
        print(f"codspeed-client: error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc), "exit_code": exc.exit_code}))
        return exc.exit_code
    except Skipped as exc:
        warning = f"::warning title=codspeed-client {args.command} skipped::{exc}"  # an annotation on the job
        answer = "json" if getattr(args, "json", False) else getattr(args, "format", "text")
        # stdout is data another step reads (a JSON answer, a step summary): the runner reads stderr's too
        print(warning, file=sys.stdout if answer == "text" else sys.stderr)
        if answer == "json":
            print(json.dumps({"skipped": str(exc)}))
        return OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
