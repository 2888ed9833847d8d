"""``env``: what was detected from the CI and git, and what a push would lack. It only tells: exit 0."""

from __future__ import annotations

import argparse

from .common import NO_COMMIT, Output, Target, add_common

NAME = "env"
HELP = "print what was detected from the CI and git"
EXAMPLE = "  codspeed-client env --json\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)


def run(args: argparse.Namespace) -> int:
    target = Target(args, check=False)
    ctx = target.ctx
    detected = {
        "provider": ctx.provider,
        "project": target.project,
        "run_id": target.run_id,
        "run_attempt": ctx.run_attempt,
        "commit": target.commit,
        "ref": ctx.ref,
        "head_ref": ctx.head_ref,
        "base_ref": ctx.base_ref,
        "base_commit": ctx.base_commit,
        "event": ctx.event,
        "fork": ctx.fork,
        "job": ctx.job,
        "shard": ctx.shard,
        "api_url": target.api_url,
        "token": "set" if target.token else None,
    }
    missing = target.missing() + ([] if target.commit else [NO_COMMIT])
    lines = [f"{k}: {v if v is not None else '- (not detected)'}" for k, v in detected.items()]
    lines += [f"missing: {what}" for what in missing]
    Output(args).result({**detected, "missing": missing}, "\n".join(lines))
    return 0
