"""The ``codspeed-client`` command: its parser, built from the commands' modules, and ``main``.
Each command imports what it sends with when it runs, so ``--help`` starts fast."""

from __future__ import annotations

import argparse
import io
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


def _writes_whole() -> None:
    """Python's unbuffered mode (``-u``, ``PYTHONUNBUFFERED``, which many CI images set) hands text
    straight to the file and drops what a write leaves unwritten (CPython gh-85393): a job paused
    while a long report went to a pipe (a stopped container, a profiler) cut the report there. A
    buffered writer writes all of it, and flushes at each line as unbuffered mode does. Only the
    process's own streams: not one a caller put in their place (a test's capture)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is getattr(sys, f"__{name}__") and isinstance(getattr(stream, "buffer", None), io.FileIO):
            whole = io.BufferedWriter(io.FileIO(stream.fileno(), "w", closefd=False))  # closing it leaves the fd
            setattr(sys, name, io.TextIOWrapper(whole, stream.encoding, stream.errors, line_buffering=True))


def main(argv: list[str] | None = None) -> int:
    _writes_whole()
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
