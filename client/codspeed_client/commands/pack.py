"""``pack``: the archive ``push --profile-folder`` sends, written to a file and checked as push checks it."""

from __future__ import annotations

import argparse

from ..errors import USAGE, ClientError

NAME = "pack"
HELP = "write the archive push would send (a normalized tar.gz) without sending it"
EXAMPLE = "  codspeed-client pack profiles/ -o shard.tar.gz\n"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="the folder CodSpeed wrote its profiles to")
    parser.add_argument("-o", "--output", required=True, help="the archive to write")
    parser.add_argument(
        "--executor",
        choices=("valgrind", "walltime", "memory"),
        help="what made the profiles (default: told from the folder's files)",
    )


def run(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from .. import bundle

    target = Path(args.output)
    if not args.output.strip() or target.is_dir():
        raise ClientError(f"-o {args.output!r} is not a file name: give the archive's path", USAGE)
    if not target.parent.is_dir():
        raise ClientError(f"cannot write {args.output}: its folder {target.parent} does not exist", USAGE)
    made = bundle.from_folder(Path(args.folder), args.executor)
    try:  # what push would refuse, pack refuses too
        bundle.Verdict(made.path, made.executor, shown=f"the archive of {args.folder}").result()
    except ClientError:
        made.path.unlink(missing_ok=True)
        raise
    shutil.move(str(made.path), target)
    print(f"packed {len(made.files)} files of {args.folder} into {target}: {made.size} bytes, crc32 {made.crc32()}")
    return 0
