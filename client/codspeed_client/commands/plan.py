"""``plan``: which shards a change affects, from the repository's shard config and the changed files."""

from __future__ import annotations

import argparse
import json
import os

from ..errors import CONFIG, USAGE, ClientError, Skipped
from .common import Output, Target, add_common, listed
from .open_run import send_open

NAME = "plan"
HELP = (
    "say which shards a change affects, from the repository's shard config and the changed files; with --open, "
    "open the run with that plan"
)
EXAMPLE = "  codspeed-client plan --open     # in a job before the matrix: writes matrix= to GITHUB_OUTPUT\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help=".codspeed/shards.toml at the repository's root by default")
    parser.add_argument(
        "--changed",
        help="a file listing the changed paths, one a line ('-': standard input); "
        "default: git diff --name-only against the merge base",
    )
    parser.add_argument("--base", help="the commit to diff against (default: the pull request's merge base)")
    parser.add_argument(
        "--default-branch", default="main", help="a push to it runs each shard marked so (default main)"
    )
    parser.add_argument(
        "--dotenv",
        help="also write CODSPEED_SHARDS, CODSPEED_SKIP, CODSPEED_EXPECT, CODSPEED_MATRIX "
        "here (a GitLab dotenv report)",
    )
    parser.add_argument("--open", action="store_true", help="open the run with exactly these shards and skips")
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    from .. import plan as planning
    from ..git import tracked_files

    try:
        target, skipped = Target(args, check=args.open), None  # only an open sends anything
    except Skipped as exc:  # a fork's pull request, no token: the plan is still written, the run not opened
        target, skipped = Target(args, check=False), exc
    root = target.ctx.repository_root or "."
    config = planning.load(args.config or os.path.join(root, planning.CONFIG_PATH))
    _warn_unmatched(config.unmatched(tracked_files(root) or []))  # no file known (no git): nothing to say
    shards = config.plan(_changed(args, target, root), target.ctx.ref == f"refs/heads/{args.default_branch}")
    for name, why in shards.runs.items():
        print(f"runs {name}: {why}")
    for name, why in shards.skips.items():
        print(f"skips {name}: {why}")
    _write_outputs(
        args,
        {
            "matrix": json.dumps({"include": [{"shard": name} for name in shards.runs]}),
            "shards": ",".join(shards.runs),
            "skip": ",".join(shards.skips),
            "expect": ",".join(shards.names),
        },
    )
    if skipped is not None:
        raise skipped
    if args.open:
        target.need_commit()
        send_open(args, target, {"expect": shards.names}, list(shards.skips))
    return 0


def _warn_unmatched(unmatched: list[tuple[str, str]]) -> None:
    for where, pattern in unmatched:
        Output.warn(
            f"{where} pattern {pattern!r} matches no file of the repository: a change there never runs the "
            "shard (a typo, or a path since moved?)"
        )


def _changed(args: argparse.Namespace, target: Target, root: str) -> list[str] | None:
    """The files changed (None: no base to compare with): ``--changed``, else git's since the base."""
    from .. import plan as planning
    from ..git import changed_files

    changed: list[str] | None
    if args.changed:
        changed = listed("--changed", args.changed)
    else:
        base = args.base or target.ctx.base_commit
        changed = changed_files(root, base, None if args.base else target.ctx.head_commit) if base else None
        if base and changed is None:
            raise ClientError(
                f"git cannot tell what changed since {base} here: fetch it (actions/checkout's "
                "fetch-depth: 0) or pass --changed FILE",
                CONFIG,
            )
    if changed is not None and (too_long := planning.long_path(changed)):
        raise ClientError(
            f"a changed path of {len(too_long)} characters ({too_long[:60]!r}...) is longer than a path "
            f"can be ({planning.MAX_PATH}): check --changed",
            USAGE,
        )
    return changed


def _write_outputs(args: argparse.Namespace, lines: dict[str, str]) -> None:
    """The plan as the CI's step outputs: GitHub's ``$GITHUB_OUTPUT``, a GitLab dotenv report."""
    for path, form, what in (
        (os.environ.get("GITHUB_OUTPUT"), "{k}={v}", "$GITHUB_OUTPUT"),
        (args.dotenv, "CODSPEED_{K}={v}", "--dotenv"),
    ):
        if path:
            try:
                with open(path, "a") as out:
                    out.writelines(form.format(k=k, K=k.upper(), v=v) + "\n" for k, v in lines.items())
            except OSError as exc:
                raise ClientError(f"cannot write the plan to {what} {path}: {exc.strerror}", USAGE) from exc
