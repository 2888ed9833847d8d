"""``status``: the run's report, waited for, printed, and held to a regression threshold."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import REGRESSED, TIMEOUT, USAGE, ClientError
from .common import Target, add_common

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from codspeed_rules.report_json import ReportJson

    from ..api import AggregatorApi

NAME = "status"
HELP = "show the run's report"
EXAMPLE = (
    "  codspeed-client status --wait --timeout 1800 --fail-on-regression 5\n"
    '  codspeed-client status --format markdown >> "$GITHUB_STEP_SUMMARY"\n'
)


def _percent(text: str) -> str | float:
    """``5`` or ``5%`` as 0.05; "report": the report's own threshold."""
    if text == "report":
        return text
    number = text.strip().removesuffix("%")
    try:
        value = float(number) / 100
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage (5 or 5%)") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0 (5 or 5%)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true", help="block until the run is final")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait at most (default 1800)")
    parser.add_argument("--interval", type=float, default=5, help="seconds between polls (default 5)")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument(
        "--fail-on-regression",
        nargs="?",
        const="report",
        type=_percent,
        metavar="PCT",
        help="exit 13 when a benchmark regressed past PCT (5 or 5%%; alone: the stack's threshold)",
    )
    parser.add_argument(
        "--allow-overlaps",
        action="store_true",
        help="with --wait: exit 0, not 14, when a benchmark was measured in more than one shard",
    )
    parser.add_argument(
        "--benchmarks",
        action="store_true",
        help="list every benchmark (read shard by shard), not only the worst changes",
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from ..report import every_benchmark, exit_sentences, final_exit_code, regressions_past

    _check(args)
    target = Target(args)
    api = target.api()
    report, timed_out = _read(args, api, target)
    if args.benchmarks and report is not None:
        report["benchmarks"] = every_benchmark(api, report)
    regressed = None
    if args.fail_on_regression is not None and report is not None:
        regressed = regressions_past(api, report, args.fail_on_regression)
    _show(args, api, target, report)
    code = final_exit_code(report, timed_out, args.allow_overlaps) if report is not None and args.wait else 0
    code = code or (REGRESSED if regressed else 0)
    _say(exit_sentences(report, code, regressed, timed_out, args.allow_overlaps), args, target, timed_out)
    return code


def _say(sentences: list[str], args: argparse.Namespace, target: Target, timed_out: bool) -> None:
    """Why status exits as it does, on stderr."""
    for line in sentences:
        print(f"codspeed-client: {line}", file=sys.stderr)
    if timed_out:
        print(
            f"codspeed-client: timed out after {args.timeout:g}s waiting for run {target.run_id} to be final",
            file=sys.stderr,
        )


def _check(args: argparse.Namespace) -> None:
    if args.timeout < 0 or args.interval <= 0:
        raise ClientError("--timeout must be 0 or more seconds and --interval more than 0", USAGE)
    if args.benchmarks and args.format == "markdown":
        raise ClientError(
            "--benchmarks lists benchmarks in text or JSON: the Markdown names the worst changes only, "
            "and links the run's page",
            USAGE,
        )


def _read(args: argparse.Namespace, api: AggregatorApi, target: Target) -> tuple[ReportJson | None, bool]:
    """The run's report (None: only its Markdown is wanted, fetched as such), and whether the wait timed out."""
    from ..report import wait_for_final

    if not args.wait:
        markdown_only = args.format == "markdown" and not args.json  # no JSON read first
        # the pipeline's run, or its runner jobs': the report read to tell which is the report shown
        settled = target.settle_run(api) if target.runner_run_id else None
        return (None if markdown_only else settled or api.report(target.project, target.run_id)), False
    report, timed_out = wait_for_final(lambda: target.settle_run(api), args.timeout, args.interval)
    if report is None:
        also = f" nor {target.runner_run_id} (its CodSpeed runner jobs')" if target.runner_run_id else ""
        raise ClientError(
            f"run {target.run_id}{also} of {target.project} did not appear within {args.timeout:g} s: "
            "did any shard push to it?",
            TIMEOUT,
        )
    return report, timed_out


def _show(args: argparse.Namespace, api: AggregatorApi, target: Target, report: ReportJson | None) -> None:
    from ..report import render_text

    if args.json or args.format == "json":
        print(json.dumps(report, indent=2))
    elif args.format == "markdown":
        print(api.report_markdown(target.project, target.run_id), end="")
    elif not args.quiet and report is not None:
        print(render_text(report, every=args.benchmarks), end="")
