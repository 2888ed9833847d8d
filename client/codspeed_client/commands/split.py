"""``split``: which benchmarks go to which shard, balanced on their recorded costs."""

from __future__ import annotations

import argparse

from ..errors import USAGE, ClientError
from .common import Output, Target, add_common, listed

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

NAME = "split"
HELP = "say which benchmarks go to which shard, balanced on their recorded costs"
EXAMPLE = "  codspeed-client split --shards 4 --json\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, required=True, help="how many shards")
    parser.add_argument("--branch", help="the branch whose latest forwarded run's costs are used")
    parser.add_argument("--names", help="a file of the benchmarks to split, one a line (default: those recorded)")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from ..balance import seconds_by_name, split

    if args.shards < 1:
        raise ClientError(f"--shards {args.shards}: split into 1 shard or more", USAGE)
    names = list(dict.fromkeys(listed("--names", args.names))) if args.names else None
    target = Target(args, need_run=False)
    answer = target.api().costs(target.project, args.branch, target.run_id)
    costs = seconds_by_name(answer["benchmarks"], names)
    if args.shards > len(costs):  # pytest fails a job that collects no test (exit 5): its shard would count missing
        empty = args.shards - len(costs)
        raise ClientError(
            f"--shards {args.shards} for {len(costs)} benchmarks: {empty} shard{'s' * (empty > 1)} would be "
            f"empty, and pytest fails a job that collects no test; split into {len(costs)} or fewer",
            USAGE,
        )
    groups = split(costs, args.shards)
    summary: dict[str, dict[str, Any]] = {
        str(i): {"seconds": round(sum(costs[n] for n in g), 6), "benchmarks": g} for i, g in enumerate(groups, 1)
    }
    Output(args).result(
        summary,
        "\n".join(
            f"shard {i}: {s['seconds']:.3f} s, {len(s['benchmarks'])} benchmarks: {' '.join(s['benchmarks'])}"
            for i, s in summary.items()
        ),
    )
    return 0
