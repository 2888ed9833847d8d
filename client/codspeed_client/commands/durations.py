"""``durations``: what each benchmark cost on the base branch's latest run, as pytest-split reads it."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import USAGE, ClientError
from .common import Target, add_common

NAME = "durations"
HELP = "write what each benchmark cost on the base branch's latest run"
EXAMPLE = (
    "  codspeed-client durations -o .test_durations && pytest --splits 4 --group 1 --durations-path .test_durations\n"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--branch", help="the branch whose latest forwarded run is read (default: the stack's)")
    parser.add_argument(
        "--format",
        choices=("pytest-split", "json"),
        default="pytest-split",
        help="pytest-split's durations file (node id: seconds), or the aggregator's answer",
    )
    parser.add_argument("-o", "--output", help="the file to write (default: standard output)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from ..balance import seconds_by_name

    target = Target(args, need_run=False)
    answer = target.api().costs(target.project, args.branch, target.run_id)
    body = answer if args.format == "json" else seconds_by_name(answer["benchmarks"])
    text = json.dumps(body, indent=1, sort_keys=True) + "\n"
    if args.output:
        try:
            with open(args.output, "w") as out:
                out.write(text)
        except OSError as exc:
            raise ClientError(f"cannot write {args.output}: {exc.strerror}", USAGE) from exc
        runs = answer.get("runs") or [answer["run_id"]]  # each benchmark's latest recorded cost, the latest run first
        of = f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)}"
        print(f"{len(answer['benchmarks'])} benchmarks' costs of {of} on {answer['branch']} written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0
