"""``close``: every shard that will come has come; forward with what has arrived."""

from __future__ import annotations

import argparse

from ..errors import REFUSED, ClientError
from .common import Output, Target, add_common, ci_origin

NAME = "close"
HELP = "say that every shard that will come has come"
EXAMPLE = "  codspeed-client close --skip lint\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skip", action="append", default=[], help="a shard skipped on purpose (repeat, or comma-separate)"
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    target = Target(args)
    skip = [name.strip() for value in args.skip for name in value.split(",") if name.strip()]
    api = target.api()
    if target.runner_run_id and target.settle_run(api) is None:
        raise ClientError(
            f"no run {target.run_id} (this pipeline's pushed shards) nor {target.runner_run_id} (its CodSpeed "
            f"runner jobs, by commit and ref) for {target.project}: did any job upload to the aggregator?",
            REFUSED,
        )
    origin = ci_origin(target.ctx)
    if target.ctx.runner and "ci_run" in origin:
        # the runner this gate runs on: a close sent without a token speaks for its CI attempt only once
        # GitHub lists every other job of that attempt as ended
        origin["ci_job"] = target.ctx.runner
    answer = api.close(target.project, target.run_id, skip, origin)
    closed = answer.get("run_id") or target.run_id  # the attempt closed: the run's latest, or the one named
    Output(args).result(answer, f"run {closed} ({target.project}): {answer['state']}: {answer['message']}")
    return 0
