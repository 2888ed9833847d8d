"""``open``: declare the run before any shard runs, with its shards and those skipped on purpose."""

from __future__ import annotations

import argparse

from ..errors import USAGE, ClientError
from .common import Output, Target, add_common, shard_names, where_from

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

NAME = "open"
HELP = "declare the run before any shard runs: its shards, and those skipped on purpose"
EXAMPLE = (
    "  codspeed-client open --shards 4 --skip 3\n  codspeed-client open --expect parse,lint,codegen\n"
    "  codspeed-client open --job benchmarks=4 --job memory   # a CodSpeed workflow's jobs, by their job name\n"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, help="the run has shards 1 to N")
    parser.add_argument("--expect", help="the run's shard names, comma-separated")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        help="a shard skipped on purpose, carried from the baseline run (repeat, or comma-separate)",
    )
    parser.add_argument(
        "--job",
        action="append",
        default=[],
        metavar="NAME[=N]",
        help="a job of the workflow whose CodSpeed runner uploads to the aggregator, by its id (GitHub's "
        "GITHUB_JOB; GitLab's job name), and how many of it run (a matrix's size; 1 by default); "
        "repeat for each job",
    )
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    target = Target(args)
    target.need_commit()
    jobs = _jobs(args.job)
    _one_manifest(args, jobs)
    skip = shard_names("--skip", ",".join(args.skip)) if args.skip else []
    manifest, names = _shards(args, jobs, skip)
    if outside := [name for name in skip if name not in names]:
        raise ClientError(f"--skip {','.join(outside)}: not among the run's shards ({','.join(names[:20])})", USAGE)
    send_open(args, target, manifest, skip)
    return 0


def _one_manifest(args: argparse.Namespace, jobs: dict[str, int]) -> None:
    """--shards or --expect (not both), or jobs only; a count of 1 or more."""
    if (args.shards is not None and args.expect is not None) or (
        args.shards is None and args.expect is None and not jobs
    ):
        raise ClientError(
            "say which shards the run has: --shards N (shards 1 to N) or --expect a,b,c, and "
            "--job NAME=N for each job whose CodSpeed runner uploads to the aggregator",
            USAGE,
        )
    if args.shards is not None and args.shards < 1:
        raise ClientError(f"--shards {args.shards}: a run has 1 shard or more", USAGE)


def _shards(args: argparse.Namespace, jobs: dict[str, int], skip: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The manifest the open sends, and the names of its shards (none for jobs only, which skip nothing)."""
    manifest: dict[str, Any] = {"jobs": jobs} if jobs else {}
    if args.shards is None and args.expect is None:
        if skip:
            raise ClientError(
                "--skip names shards of --shards or --expect: a job that does not run is left out of --job", USAGE
            )
        return manifest, []
    if args.expect is not None:
        names = shard_names("--expect", args.expect)
        return manifest | {"expect": names}, names
    return manifest | {"total": args.shards}, [str(i) for i in range(1, args.shards + 1)]


def _jobs(values: list[str]) -> dict[str, int]:
    """``--job NAME[=N]``s: each job's name (as its CodSpeed runner sends it) and how many of it run."""
    jobs: dict[str, int] = {}
    for value in values:
        name, equals, count = value.strip().rpartition("=")
        if not equals or not count.strip().isdigit():
            name, count = value, "1"
        name = name.strip()
        if not name or int(count) < 1:
            raise ClientError(
                f"--job {value!r}: give a job's name, and how many of it run (NAME=N, N at least 1)", USAGE
            )
        if name in jobs:
            raise ClientError(f"--job {name} is given twice", USAGE)
        jobs[name] = int(count)
    return jobs


def send_open(args: argparse.Namespace, target: Target, manifest: dict[str, Any], skip: list[str]) -> None:
    """Open the run with this manifest and skip list (``open``, and ``plan --open``)."""
    from .. import metadata

    request = {
        "project": target.project,
        "run_id": target.run_id,
        "skip": skip,
        "commit": target.commit,
        "ref": target.ctx.ref,
        "base_ref": target.ctx.base_ref,
        **where_from(target.ctx, target.commit),
        **manifest,
        "provider": target.ctx.repository_provider,
        # what a run whose every shard is skipped is forwarded under: this job's, as a push states it
        "metadata": metadata.build(
            target.ctx,
            project=target.project,
            run_id=target.run_id,
            commit=target.commit,
            shard=target.ctx.job or "open",
            tokenless=target.tokenless,
        ),
    }
    answer = target.api().open(request)
    Output(args).result(answer, f"run {answer['run_id']} ({target.project}): {answer['state']}: {answer['message']}")
