"""``push``: upload this job's shard, checked with the aggregator's rules while it goes."""

from __future__ import annotations

import argparse
import json
import re

from ..ci import next_run_index
from ..errors import NETWORK, USAGE, ClientError
from .common import Output, Target, add_common, ci_origin, shard_names, where_from

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

    from codspeed_rules.bundle import BundleSummary
    from codspeed_rules.report_json import ReportJson

    from ..api import AggregatorApi
    from ..bundle import Bundle, Verdict

NAME = "push"
HELP = "upload this job's shard"
EXAMPLE = (
    "  codspeed-client push --shard 2/4 --profile-folder profiles/\n"
    "  codspeed-client push --shard parse --expect parse,lint,codegen --archive shard.tar.gz --dry-run\n"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        help="I/N (shard I of N) or a shard name (default: GitLab's CI_NODE_INDEX/CI_NODE_TOTAL, "
        "Buildkite's parallel job)",
    )
    parser.add_argument("--expect", help="comma-separated names of every shard of the run")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--profile-folder", help="the folder CodSpeed wrote its profiles to")
    source.add_argument("--archive", help="an already made tar.gz of the profile folder")
    parser.add_argument(
        "--executor",
        choices=("valgrind", "walltime", "memory"),
        help="the CodSpeed executor that made the profiles "
        "(default: told by a folder's files; valgrind for an archive)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the shard with the aggregator's rules and show what would be sent; send nothing",
    )
    parser.add_argument(
        "--wait-upstream",
        type=_seconds,
        default=WAIT_UPSTREAM,
        metavar="SECONDS",
        help=f"where each shard goes upstream as it is counted, wait at most this long until this one "
        f"is, as CodSpeed's runner ends its job after its upload (default {WAIT_UPSTREAM}; 0: do not "
        "wait; running out is a warning, never a failure: the part still goes)",
    )
    add_common(parser)


# A 5 GiB bundle's validation, modelled by bench/scale.py at a Lambda vCPU (432 s), with its send: the wait ends as
# soon as the part is upstream (well under a second for the usual shard on the local stack, bench/parts.py)
WAIT_UPSTREAM = 600


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value!r}: give 0 to 3600 seconds")
    return seconds


def parse_shard(shard: str, expect: str | None) -> tuple[str, int | None, list[str] | None]:
    """``--shard`` and ``--expect`` as (shard name, total or None, names or None)."""
    indexed = re.fullmatch(r"([0-9]+)/([0-9]+)", shard)
    names = [n.strip() for n in expect.split(",") if n.strip()] if expect else None
    if indexed:
        index, total = int(indexed[1]), int(indexed[2])
        if total < 1 or not 1 <= index <= total:
            raise ClientError(f"--shard {shard}: write I/N with 1 <= I <= N (shard 2 of 4 is --shard 2/4)", USAGE)
        if names:
            raise ClientError("--shard I/N already says how many shards there are: drop --expect", USAGE)
        return str(index), total, None
    if "/" in shard or not shard:
        raise ClientError(f"--shard {shard!r} is neither I/N (shard 2 of 4 is --shard 2/4) nor a shard name", USAGE)
    if names is None:
        hint = f"--shard {shard}/N (shard {shard} of N)" if shard.isdigit() else f"--expect {shard},other,..."
        raise ClientError(
            f"--shard {shard} says no total: write {hint}, so the run knows when every shard is in", USAGE
        )
    names = shard_names("--expect", expect or "")
    if shard not in names:
        raise ClientError(f"--shard {shard} is not among --expect {expect}", USAGE)
    return shard, None, names


def run(args: argparse.Namespace) -> int:
    from .. import bundle

    out = Output(args)
    target, (shard, total, names) = _what_to_push(args)
    made = _bundled(args)
    try:
        verdict = bundle.Verdict(made.path, made.executor)  # the aggregator's rules, checked while the upload goes
        api = None if args.dry_run else target.api()  # loads the HTTP client while the archive's CRC32 is taken
        request = _request(args, target, made, (shard, total, names), out)
        if api is None:
            return _dry_run(out, made, verdict.result(), request)
        grant = _upload_checked(api, made, request, verdict, out)
        if target.tokenless:  # as the runner says it for a tokenless upload it sent: the hash of the POST's bytes
            from .. import metadata

            out.say(f'CodSpeed Run Hash: "{metadata.run_hash(request["metadata_body"].encode())}"')
    finally:
        if args.profile_folder:
            made.path.unlink(missing_ok=True)
    run_id = grant.get("run_id") or target.run_id
    pushed, said = _pushed(shard, total, made, target, run_id, grant.get("attempt") or 1)
    if grant.get("sent_on_arrival") and args.wait_upstream > 0:
        said += _followed(args, api, target, (shard, made.executor, run_id, grant.get("upload_id")), pushed, out)
    out.result(pushed, said)
    return 0


def _bundled(args: argparse.Namespace) -> Bundle:
    """The shard's archive: the profile folder packed, or the archive given."""
    from pathlib import Path

    from .. import bundle

    if args.profile_folder:
        return bundle.from_folder(Path(args.profile_folder), args.executor)
    return bundle.from_archive(Path(args.archive), args.executor or "valgrind")


def _upload_checked(
    api: AggregatorApi, made: Bundle, request: dict[str, Any], verdict: Verdict, out: Output
) -> dict[str, Any]:
    """The upload, its bundle checked with the aggregator's rules as it goes: a shard they refuse says
    more than the failure it caused."""
    try:
        grant = _upload(api, made, request, verdict, quiet=out.quiet or out.json)
    except ClientError:
        verdict.result()
        raise
    verdict.result()
    return grant


def _pushed(
    shard: str, total: int | None, made: Bundle, target: Target, run_id: str, attempt: int
) -> tuple[dict[str, Any], str]:
    """What push answers: the shard, its run and attempt, as JSON and as a sentence."""
    pushed = {
        "pushed": shard,
        "executor": made.executor,
        "project": target.project,
        "run_id": run_id,
        "attempt": attempt,
        "size": made.size,
    }
    return pushed, _pushed_said(shard, total, made, target, run_id, attempt)


def _what_to_push(args: argparse.Namespace) -> tuple[Target, tuple[str, int | None, list[str] | None]]:
    """Where the shard goes and which it is, each flag checked before anything is read or sent."""
    for flag, value in (("--profile-folder", args.profile_folder), ("--archive", args.archive)):
        if value is not None and not value.strip():
            raise ClientError(f"{flag} is empty: give the folder the profiles are in, or an archive of it", USAGE)
    target = Target(args, need_api=not args.dry_run)
    if args.shard is None and target.ctx.shard is None:
        raise ClientError("no --shard: pass --shard I/N (shard I of N), or a name with --expect", USAGE)
    manifest = parse_shard(args.shard if args.shard is not None else target.ctx.shard or "", args.expect)
    target.need_commit()
    return target, manifest


def _followed(
    args: argparse.Namespace,
    api: AggregatorApi,
    target: Target,
    upload: tuple[str, str, str, str | None],
    pushed: dict[str, Any],
    out: Output,
) -> str:
    """The shard's part followed upstream (a parts run sends it as it is counted): noted in ``pushed``,
    and said in a line, as the runner ends its job after its upload."""
    from codspeed_rules.names import shard_key

    shard, executor, run_id, upload_id = upload
    upstream = _upstream(api, target.project, run_id, (shard_key(shard, executor), upload_id), args.wait_upstream, out)
    pushed["upstream"] = upstream
    if upstream is None:
        return ""
    link = f"; {upstream['codspeed_url']}" if upstream.get("codspeed_url") else ""
    return f"\nupstream: its part is CodSpeed's run {upstream['run_id'] or '-'}{link}"


def _request(
    args: argparse.Namespace,
    target: Target,
    made: Bundle,
    manifest: tuple[str, int | None, list[str] | None],
    out: Output,
) -> dict[str, Any]:
    """The upload request: the shard's metadata as the runner would write it for this job, and its bytes,
    which go upstream as they are."""
    from .. import metadata

    shard, total, names = manifest
    meta = metadata.build(
        target.ctx,
        project=target.project,
        run_id=target.run_id.partition("~")[0],  # the run, whichever attempt of it is asked for
        commit=target.commit,
        shard=shard,
        bundle=made,
        tokenless=target.tokenless,
        md5=made.md5(),
        expected_parts=total or len(names or ()) or 1,
        run_index=0 if args.dry_run else next_run_index(target.ctx, target.run_id),
    )
    sent = metadata.body(meta)
    request = {
        "project": target.project,
        "run_id": target.run_id,
        "shard": shard,
        "total": total,
        "expect": names,
        "size": made.size,
        "crc32": made.crc32(),
        "md5": meta["profileMd5"],
        "metadata": meta,
        "metadata_body": sent.decode(),
        **where_from(target.ctx, target.commit),
        **ci_origin(target.ctx),
    }
    return request


def _pushed_said(shard: str, total: int | None, made: Bundle, target: Target, run_id: str, attempt: int) -> str:
    of = f" of {total}" if total else ""
    files = f", {len(made.files)} files" if made.files else ""
    again = f" (attempt {attempt}: run {target.run_id} was already forwarded)" if attempt > 1 else ""
    kind = f" ({made.executor})" if made.executor != "valgrind" else ""  # a shard is its name and its executor
    return f"pushed shard {shard}{of}{kind} of run {run_id} ({target.project}): {made.size} bytes{files}{again}"


def _upstream(
    api: AggregatorApi, project: str, run_id: str, pushed: tuple[str, str | None], wait: float, out: Output
) -> dict[str, Any] | None:
    """Wait until this push's part is upstream (the ledger has its PUT answered 2xx), at most ``wait``
    seconds; what the upstream answered, or None with a warning (the part goes all the same). ``pushed``:
    the shard and its upload: in a re-run's attempt the shard shows the earlier attempt's part until
    this upload is counted."""
    key, upload_id = pushed
    import time

    from codspeed_rules.backoff import backoff

    deadline, polled = time.monotonic() + wait, 0
    while True:
        pause = backoff(polled, 0.25, 5.0, jitter=False)  # a poll, not a retry: no Retry-After to honour
        try:
            report: ReportJson | dict[str, Any] = api.report(project, run_id, missing_ok=True) or {}
        except ClientError as exc:  # the shard was accepted: following it is a courtesy, never a failure
            out.warn(
                f"shard {key} of run {run_id} was accepted, but whether its part is upstream could not be followed "
                f"({exc}): it goes as soon as it is counted, and the run's report says when"
            )
            return None
        entry = next((s for s in report.get("shards") or [] if s.get("name") == key), None)
        if entry and entry.get("upstream") and entry.get("upload_id") in (upload_id, None):  # None: an older stack
            return {"run_id": entry.get("upstream_run_id"), "codspeed_url": report.get("codspeed_url")}
        if time.monotonic() + pause > deadline:
            why = f" ({entry['reason']})" if entry and entry.get("reason") else ""
            out.warn(
                f"shard {key} of run {run_id} was not upstream within {wait:g} s{why}: it goes as soon as it is "
                "counted, and the run's report says when"
            )
            return None
        time.sleep(pause)
        polled += 1


def _upload(api: AggregatorApi, made: Bundle, request: dict[str, Any], verdict: Verdict, quiet: bool) -> dict[str, Any]:
    from ..api import UploadExpired
    from ..give_back import given_back_unless_sent
    from ..progress import Progress

    for attempt in range(2):
        grant = api.request_upload(request)
        try:
            with given_back_unless_sent(api, grant, verdict):
                api.put_bundle(
                    grant["upload_url"],
                    grant["headers"],
                    made.path,
                    None if quiet else Progress(made.size),
                    guard=verdict.guard,
                )
            return grant
        except UploadExpired:
            if attempt:
                raise ClientError(
                    "the upload URL expired twice before the bundle was sent: check the network speed "
                    "and the machine's clock",
                    NETWORK,
                ) from None
    raise AssertionError("unreachable: the second expired URL raises")


def _dry_run(out: Output, made: Bundle, checked: BundleSummary, request: dict[str, Any]) -> int:
    files = made.files or sorted(checked.files)
    summary = {
        "files": files,
        "size": made.size,
        "benchmarks": checked.benchmarks,
        "executor": made.executor,
        "verdict": "valid",
        "request": request,
    }
    lines = [
        f"would push shard {request['shard']} of run {request['run_id']} ({request['project']}): "
        f"{made.size} bytes, {len(files)} files, {checked.benchmarks} benchmarks ({made.executor}); "
        "the aggregator's rules accept it"
    ]
    lines += [f"  {name}" for name in files]
    lines += ["metadata:", json.dumps(request["metadata"], indent=2)]
    out.result(summary, "\n".join(lines))
    return 0
