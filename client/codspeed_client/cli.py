"""The ``codspeed-client`` command. Imports stay inside the commands so ``--help`` starts fast."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from . import __version__
from .errors import CONFIG, NETWORK, OK, REGRESSED, TIMEOUT, USAGE, ClientError, Skipped

EXIT_CODES = """\
exit codes: 0 done; 2 usage; 3 configuration missing; 4 token refused; 5 request refused
(conflict, invalid, run already final); 6 network or aggregator failure; 7 bad input
(folder, archive); status --wait: 10 forward failed, 11 shards missing or nothing sent,
12 timed out; status --fail-on-regression: 13 a benchmark regressed past the threshold.
"""
EXAMPLES = {
    "push": "example:\n  codspeed-client push --shard 2/4 --profile-folder profiles/\n"
            "  codspeed-client push --shard parse --expect parse,lint,codegen --archive shard.tar.gz --dry-run\n",
    "open": "example:\n  codspeed-client open --shards 4 --skip 3\n  codspeed-client open --expect parse,lint,codegen\n"
            "  codspeed-client open --job benchmarks=4 --job memory   # a CodSpeed workflow's jobs, by their job name\n",
    "plan": "example:\n  codspeed-client plan --open     # in a job before the matrix: writes matrix= to GITHUB_OUTPUT\n",
    "durations": "example:\n  codspeed-client durations -o .test_durations && pytest --splits 4 --group 1 --durations-path .test_durations\n",
    "split": "example:\n  codspeed-client split --shards 4 --json\n",
    "close": "example:\n  codspeed-client close --skip lint\n",
    "status": "example:\n  codspeed-client status --wait --timeout 1800 --format markdown >> \"$GITHUB_STEP_SUMMARY\"\n",
    "env": "example:\n  codspeed-client env --json\n",
    "pack": "example:\n  codspeed-client pack profiles/ -o shard.tar.gz\n",
}


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


def _common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run and aggregator (detected from the CI and git when absent)")
    group.add_argument("--api-url", help="aggregator URL (env CODSPEED_AGGREGATOR_URL)")
    group.add_argument("--token", help="aggregator token (env CODSPEED_AGGREGATOR_TOKEN; never CodSpeed's own CODSPEED_TOKEN)")
    group.add_argument("--project", help="owner/repo (GitLab: group/subgroup/repo)")
    group.add_argument("--run-id", help="the CI run every shard belongs to")
    group.add_argument("--commit", help="commit SHA")
    group.add_argument("--ref", help="git ref, e.g. refs/heads/main")
    group.add_argument("--base-ref", help="the branch a pull request targets")
    group.add_argument("--base-commit", help="the base branch's commit the change is built on: its run is the baseline "
                                             "(detected from GitHub's and GitLab's pull requests)")
    out = parser.add_argument_group("output")
    out.add_argument("--quiet", action="store_true", help="print errors only")
    out.add_argument("--json", action="store_true", help="print one JSON object (errors too)")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="codspeed-client", description="Push CodSpeed benchmark shards to the shard aggregator.",
        epilog="".join(EXAMPLES.values()) + "\n" + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    root.add_argument("--version", action="version", version=f"codspeed-client {__version__}")
    commands = root.add_subparsers(dest="command", required=True, metavar="{push,close,status,env,pack}")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, epilog=EXAMPLES[name] + "\n" + EXIT_CODES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)

    push = command("push", "upload this job's shard")
    push.add_argument("--shard", help="I/N (shard I of N) or a shard name (default: GitLab's CI_NODE_INDEX/CI_NODE_TOTAL, "
                                      "Buildkite's parallel job)")
    push.add_argument("--expect", help="comma-separated names of every shard of the run")
    source = push.add_mutually_exclusive_group(required=True)
    source.add_argument("--profile-folder", help="the folder CodSpeed wrote its profiles to")
    source.add_argument("--archive", help="an already made tar.gz of the profile folder")
    push.add_argument("--executor", choices=("valgrind", "walltime", "memory"),
                      help="the CodSpeed executor that made the profiles (default: told by a folder's files; valgrind for an archive)")
    push.add_argument("--dry-run", action="store_true",
                      help="check the shard with the aggregator's rules and show what would be sent; send nothing")
    _common(push)

    opening = command("open", "declare the run before any shard runs: its shards, and those skipped on purpose")
    opening.add_argument("--shards", type=int, help="the run has shards 1 to N")
    opening.add_argument("--expect", help="the run's shard names, comma-separated")
    opening.add_argument("--skip", action="append", default=[],
                         help="a shard skipped on purpose, carried from the baseline run (repeat, or comma-separate)")
    opening.add_argument("--job", action="append", default=[], metavar="NAME[=N]",
                         help="a job of the workflow whose CodSpeed runner uploads to the aggregator, by its id (GitHub's "
                              "GITHUB_JOB; GitLab's job name), and how many of it run (a matrix's size; 1 by default); "
                              "repeat for each job")
    _common(opening)

    planning = command("plan", "say which shards a change affects, from the repository's shard config and the "
                                "changed files; with --open, open the run with that plan")
    planning.add_argument("--config", help=".codspeed/shards.toml at the repository's root by default")
    planning.add_argument("--changed", help="a file listing the changed paths, one a line ('-': standard input); "
                                            "default: git diff --name-only against the merge base")
    planning.add_argument("--base", help="the commit to diff against (default: the pull request's merge base)")
    planning.add_argument("--default-branch", default="main", help="a push to it runs each shard marked so (default main)")
    planning.add_argument("--dotenv", help="also write CODSPEED_SHARDS, CODSPEED_SKIP, CODSPEED_EXPECT, CODSPEED_MATRIX "
                                           "here (a GitLab dotenv report)")
    planning.add_argument("--open", action="store_true", help="open the run with exactly these shards and skips")
    _common(planning)

    durations = command("durations", "write what each benchmark cost on the base branch's latest run")
    durations.add_argument("--branch", help="the branch whose latest forwarded run is read (default: the stack's)")
    durations.add_argument("--format", choices=("pytest-split", "json"), default="pytest-split",
                           help="pytest-split's durations file (node id: seconds), or the aggregator's answer")
    durations.add_argument("-o", "--output", help="the file to write (default: standard output)")
    _common(durations)

    splitting = command("split", "say which benchmarks go to which shard, balanced on their recorded costs")
    splitting.add_argument("--shards", type=int, required=True, help="how many shards")
    splitting.add_argument("--branch", help="the branch whose latest forwarded run's costs are used")
    splitting.add_argument("--names", help="a file of the benchmarks to split, one a line (default: those recorded)")
    _common(splitting)

    close = command("close", "say that every shard that will come has come")
    close.add_argument("--skip", action="append", default=[], help="a shard skipped on purpose (repeat, or comma-separate)")
    _common(close)

    status = command("status", "show the run's report")
    status.add_argument("--wait", action="store_true", help="block until the run is final")
    status.add_argument("--timeout", type=float, default=1800, help="seconds to wait at most (default 1800)")
    status.add_argument("--interval", type=float, default=5, help="seconds between polls (default 5)")
    status.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    status.add_argument("--fail-on-regression", nargs="?", const="report", type=_percent, metavar="PCT",
                        help="exit 13 when a benchmark regressed past PCT (5 or 5%%; alone: the stack's threshold)")
    status.add_argument("--benchmarks", action="store_true",
                        help="list every benchmark (read shard by shard), not only the worst changes")
    _common(status)

    env = command("env", "print what was detected from the CI and git")
    _common(env)
    pack = command("pack", "write the archive push would send (a normalized tar.gz) without sending it")
    pack.add_argument("folder", help="the folder CodSpeed wrote its profiles to")
    pack.add_argument("-o", "--output", required=True, help="the archive to write")
    pack.add_argument("--executor", choices=("valgrind", "walltime", "memory"),
                      help="what made the profiles (default: told from the folder's files)")
    return root


class Output:
    def __init__(self, args: argparse.Namespace) -> None:
        self.quiet = getattr(args, "quiet", False)
        self.json = getattr(args, "json", False)

    def result(self, data: dict, text: str) -> None:
        if self.json:
            print(json.dumps(data, indent=2))
        elif not self.quiet:
            print(text)


class Target:
    """Where to send, and which run: flags first, then the environment, then the CI and git.
    Values the aggregator would refuse are usage errors here, said in a sentence."""

    def __init__(self, args: argparse.Namespace, *, need_api: bool = True, check: bool = True,
                 need_run: bool = True) -> None:
        from .ci import detect

        self.ctx, self.need_run = detect(), need_run
        self.api_url = args.api_url or os.environ.get("CODSPEED_AGGREGATOR_URL")
        # a secret pasted with its line break (a CI secret, a file read into the variable) is the token
        self.token = (args.token or os.environ.get("CODSPEED_AGGREGATOR_TOKEN") or "").strip() or None
        self.project = args.project or self.ctx.project
        self.run_id = args.run_id or self.ctx.run_id
        self.commit = args.commit or self.ctx.commit
        self.ctx.ref = args.ref or self.ctx.ref
        self.ctx.base_ref = args.base_ref or self.ctx.base_ref
        self.ctx.base_commit = getattr(args, "base_commit", None) or self.ctx.base_commit
        self.retries = os.environ.get("CODSPEED_RETRIES", "5")
        if check:
            self._check(need_api)

    def missing(self, need_api: bool = True) -> list[str]:
        found = [
            (self.project, "cannot tell the project: pass --project owner/repo"),
            (self.run_id or not self.need_run, "cannot tell the run id: pass --run-id, the same in every shard of the run"),
        ]
        if need_api:
            found[:0] = [
                (self.api_url, "no aggregator URL: pass --api-url or set CODSPEED_AGGREGATOR_URL"),
                (self.token, "no token: pass --token or set CODSPEED_AGGREGATOR_TOKEN"),
            ]
        return [what for value, what in found if not value]

    def _check(self, need_api: bool) -> None:
        from codspeed_rules.names import is_commit, is_project, run_id_problem

        if self.project and not is_project(self.project):
            raise ClientError(f"--project {self.project!r} is not owner/repo (or group/subgroup/repo on GitLab)", USAGE)
        if self.run_id and (problem := run_id_problem(str(self.run_id))):
            raise ClientError(f"--run-id {problem}", USAGE)
        if self.commit and not is_commit(self.commit):
            raise ClientError(f"--commit {self.commit!r} is not a commit SHA (7 to 64 hex digits)", USAGE)
        if self.ctx.base_commit and not is_commit(self.ctx.base_commit):
            raise ClientError(f"--base-commit {self.ctx.base_commit!r} is not a commit SHA (7 to 64 hex digits)", USAGE)
        if need_api and self.api_url and not re.match(r"^https?://[^/\s]+", self.api_url):
            raise ClientError(f"--api-url {self.api_url!r} is not an http(s):// URL: give the aggregator's ApiUrl", USAGE)
        if not self.retries.isdigit():
            raise ClientError(f"CODSPEED_RETRIES={self.retries!r} is not a number of tries", USAGE)
        if need_api and self.token and not re.fullmatch(r"[\x21-\x7e]+", self.token):
            raise ClientError("the token holds a space, a control or a non-ASCII character, which an HTTP header cannot "
                              "carry: check CODSPEED_AGGREGATOR_TOKEN (or --token) for a pasted line break", CONFIG)
        if need_api and not self.token and self.ctx.fork:
            raise Skipped(f"this pull request comes from a fork ({self.ctx.fork}), whose jobs GitHub gives no "
                          "secrets: with no aggregator token nothing was sent (runs of the project's own branches "
                          "are not affected)")
        missing = self.missing(need_api)
        if missing:
            raise ClientError(missing[0], CONFIG)

    def api(self):
        from .api import AggregatorApi

        return AggregatorApi(self.api_url, self.token, attempts=int(self.retries))


def _parse_shard(shard: str, expect: str | None) -> tuple[str, int | None, list[str] | None]:
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
        raise ClientError(f"--shard {shard} says no total: write {hint}, so the run knows when every shard is in", USAGE)
    names = _names("--expect", expect)
    if shard not in names:
        raise ClientError(f"--shard {shard} is not among --expect {expect}", USAGE)
    return shard, None, names


def _where_from(ctx) -> dict:
    """What a run's first request says of its CI run and its base, each only when known (a stack
    before it takes none): the CI run's page, the base commit and the commits before it."""
    from codspeed_rules.names import MAX_ANCESTORS, is_ci_url

    from .ci import ancestors

    found = {"ci_url": ctx.ci_url} if ctx.ci_url and is_ci_url(ctx.ci_url) else {}
    if ctx.base_commit:
        found["base_commit"] = ctx.base_commit
        if before := ancestors(ctx.repository_root, ctx.base_commit, MAX_ANCESTORS):
            found["base_ancestors"] = before
    return found


def open_run(args: argparse.Namespace) -> int:
    target = Target(args)
    if not target.commit:
        raise ClientError("cannot tell the commit: pass --commit SHA", CONFIG)
    jobs = _jobs(args.job)
    if (args.shards is not None and args.expect is not None) or (args.shards is None and args.expect is None and not jobs):
        raise ClientError("say which shards the run has: --shards N (shards 1 to N) or --expect a,b,c, and "
                          "--job NAME=N for each job whose CodSpeed runner uploads to the aggregator", USAGE)
    if args.shards is not None and args.shards < 1:
        raise ClientError(f"--shards {args.shards}: a run has 1 shard or more", USAGE)
    skip = _names("--skip", ",".join(args.skip)) if args.skip else []
    manifest = {"jobs": jobs} if jobs else {}
    if args.shards is None and args.expect is None:
        if skip:
            raise ClientError("--skip names shards of --shards or --expect: a job that does not run is left out of "
                              "--job", USAGE)
        names = []
    else:
        names = _names("--expect", args.expect) if args.expect is not None else [str(i) for i in range(1, args.shards + 1)]
        manifest.update({"total": args.shards} if args.shards is not None else {"expect": names})
    outside = [name for name in skip if name not in names]
    if outside:
        raise ClientError(f"--skip {','.join(outside)}: not among the run's shards ({','.join(names[:20])})", USAGE)
    _open(args, target, manifest, skip)
    return 0


def _jobs(values: list[str]) -> dict[str, int]:
    """``--job NAME[=N]``s: each job's name (as its CodSpeed runner sends it) and how many of it run."""
    jobs: dict[str, int] = {}
    for value in values:
        name, equals, count = value.strip().rpartition("=")
        if not equals or not count.strip().isdigit():
            name, count = value, "1"
        name = name.strip()
        if not name or int(count) < 1:
            raise ClientError(f"--job {value!r}: give a job's name, and how many of it run (NAME=N, N at least 1)", USAGE)
        if name in jobs:
            raise ClientError(f"--job {name} is given twice", USAGE)
        jobs[name] = int(count)
    return jobs


def _open(args: argparse.Namespace, target: "Target", manifest: dict, skip: list[str]) -> None:
    from . import metadata

    request = {"project": target.project, "run_id": target.run_id, "skip": skip, "commit": target.commit,
               "ref": target.ctx.ref, "base_ref": target.ctx.base_ref, **_where_from(target.ctx), **manifest,
               "provider": metadata.repository_provider(target.ctx),
               # what a run whose every shard is skipped is forwarded under: this job's, as a push states it
               "metadata": metadata.build(target.ctx, project=target.project, run_id=target.run_id, commit=target.commit,
                                          shard=target.ctx.job or "open", carried=None)}
    answer = target.api().open(request)
    Output(args).result(answer, f"run {answer['run_id']} ({target.project}): {answer['state']}: {answer['message']}")


def plan(args: argparse.Namespace) -> int:
    from . import plan as planning
    from .ci import changed_files

    target = Target(args, check=args.open)  # only an open sends anything
    root = target.ctx.repository_root or "."
    config = planning.load(args.config or os.path.join(root, planning.CONFIG_PATH))
    if args.changed:
        changed = _listed("--changed", args.changed)
    else:
        base = args.base or target.ctx.base_commit
        changed = changed_files(root, base) if base else None
        if base and changed is None:
            raise ClientError(f"git cannot tell what changed since {base} here: fetch it (actions/checkout's "
                              "fetch-depth: 0) or pass --changed FILE", CONFIG)
    shards = config.plan(changed, target.ctx.ref == f"refs/heads/{args.default_branch}")
    for name, why in shards.runs.items():
        print(f"runs {name}: {why}")
    for name, why in shards.skips.items():
        print(f"skips {name}: {why}")
    lines = {"matrix": json.dumps({"include": [{"shard": name} for name in shards.runs]}),
             "shards": ",".join(shards.runs), "skip": ",".join(shards.skips), "expect": ",".join(shards.names)}
    for path, form in ((os.environ.get("GITHUB_OUTPUT"), "{k}={v}"), (args.dotenv, "CODSPEED_{K}={v}")):
        if path:
            with open(path, "a") as out:
                out.writelines(form.format(k=k, K=k.upper(), v=v) + "\n" for k, v in lines.items())
    if args.open:
        if not target.commit:
            raise ClientError("cannot tell the commit: pass --commit SHA", CONFIG)
        _open(args, target, {"expect": shards.names}, list(shards.skips))
    return 0


def _listed(flag: str, path: str) -> list[str]:
    """A file's lines, one item each, blank ones left out ('-': standard input)."""
    try:
        with (sys.stdin if path == "-" else open(path)) as listed:
            return [line.strip() for line in listed if line.strip()]
    except OSError as exc:
        raise ClientError(f"cannot read {flag} {path}: {exc.strerror}", USAGE) from exc


def _names(flag: str, value: str) -> list[str]:
    """Comma-separated shard names, each usable, none twice."""
    from codspeed_rules.names import is_shard_name

    names = [n.strip() for n in value.split(",") if n.strip()]
    for name in names:
        if not is_shard_name(name):
            raise ClientError(f"shard name {name!r} is not usable: letters, digits and _.=+@- only", USAGE)
    if not names:
        raise ClientError(f"{flag} {value!r} names no shard", USAGE)
    if len(set(names)) != len(names):
        raise ClientError(f"{flag} {value} names a shard twice", USAGE)
    return names


def push(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import bundle, metadata

    out = Output(args)
    for flag, value in (("--profile-folder", args.profile_folder), ("--archive", args.archive)):
        if value is not None and not value.strip():
            raise ClientError(f"{flag} is empty: give the folder the profiles are in, or an archive of it", USAGE)
    target = Target(args, need_api=not args.dry_run)
    if args.shard is None and target.ctx.shard is None:
        raise ClientError("no --shard: pass --shard I/N (shard I of N), or a name with --expect", USAGE)
    shard, total, names = _parse_shard(args.shard if args.shard is not None else target.ctx.shard, args.expect)
    if not target.commit:
        raise ClientError("cannot tell the commit: pass --commit SHA", CONFIG)
    if args.profile_folder:
        made = bundle.from_folder(Path(args.profile_folder), args.executor)
    else:
        made = bundle.from_archive(Path(args.archive), args.executor or "valgrind")
    try:
        verdict = bundle.Verdict(made.path, made.executor)  # the aggregator's rules, checked while the upload goes
        api = None if args.dry_run else target.api()  # loads the HTTP client while the archive's CRC32 is taken
        meta = metadata.build(target.ctx, project=target.project, run_id=target.run_id, commit=target.commit,
                              shard=shard, carried=made.carried_metadata, executor=made.executor)
        request = {"project": target.project, "run_id": target.run_id, "shard": shard, "total": total, "expect": names,
                   "size": made.size, "crc32": made.crc32(), "metadata": meta}
        request.update(_where_from(target.ctx))
        if api is None:
            return _dry_run(out, made, verdict.result(), request)
        try:
            grant = _upload(api, made, request, verdict, quiet=out.quiet or out.json)
        except ClientError:
            verdict.result()  # a shard the aggregator would refuse says more than the failure it caused
            raise
        verdict.result()
    finally:
        if args.profile_folder:
            made.path.unlink(missing_ok=True)
    of = f" of {total}" if total else ""
    files = f", {len(made.files)} files" if made.files else ""
    run_id, attempt = grant.get("run_id") or target.run_id, grant.get("attempt") or 1
    again = f" (attempt {attempt}: run {target.run_id} was already forwarded)" if attempt > 1 else ""
    out.result({"pushed": shard, "project": target.project, "run_id": run_id, "attempt": attempt, "size": made.size},
               f"pushed shard {shard}{of} of run {run_id} ({target.project}): {made.size} bytes{files}{again}")
    return 0


def _upload(api, made, request: dict, verdict, quiet: bool) -> dict:
    from .api import UploadExpired
    from .progress import Progress

    for attempt in range(2):
        grant = api.request_upload(request)
        try:
            api.put_bundle(grant["upload_url"], grant["headers"], made.path, None if quiet else Progress(made.size),
                           guard=verdict.guard)
            return grant
        except UploadExpired:
            if attempt:
                raise ClientError("the upload URL expired twice before the bundle was sent: check the network speed "
                                  "and the machine's clock", NETWORK) from None


def _dry_run(out: Output, made, checked, request: dict) -> int:
    files = made.files or sorted(checked.files)
    summary = {"files": files, "size": made.size, "benchmarks": checked.benchmarks, "executor": made.executor,
               "verdict": "valid", "request": request}
    lines = [f"would push shard {request['shard']} of run {request['run_id']} ({request['project']}): "
             f"{made.size} bytes, {len(files)} files, {checked.benchmarks} benchmarks ({made.executor}); "
             "the aggregator's rules accept it"]
    lines += [f"  {name}" for name in files]
    lines += ["metadata:", json.dumps(request["metadata"], indent=2)]
    out.result(summary, "\n".join(lines))
    return 0


def durations(args: argparse.Namespace) -> int:
    from .balance import seconds_by_name

    target = Target(args, need_run=False)
    answer = target.api().costs(target.project, args.branch)
    body = answer if args.format == "json" else seconds_by_name(answer["benchmarks"])
    text = json.dumps(body, indent=1, sort_keys=True) + "\n"
    if args.output:
        try:
            with open(args.output, "w") as out:
                out.write(text)
        except OSError as exc:
            raise ClientError(f"cannot write {args.output}: {exc.strerror}", USAGE) from exc
        print(f"{len(answer['benchmarks'])} benchmarks' costs of run {answer['run_id']} on {answer['branch']} "
              f"written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def split_shards(args: argparse.Namespace) -> int:
    from .balance import seconds_by_name, split

    if args.shards < 1:
        raise ClientError(f"--shards {args.shards}: split into 1 shard or more", USAGE)
    names = list(dict.fromkeys(_listed("--names", args.names))) if args.names else None
    target = Target(args, need_run=False)
    answer = target.api().costs(target.project, args.branch)
    costs = seconds_by_name(answer["benchmarks"], names)
    groups = split(costs, args.shards)
    out = Output(args)
    summary = {str(i): {"seconds": round(sum(costs[n] for n in g), 6), "benchmarks": g} for i, g in enumerate(groups, 1)}
    out.result(summary, "\n".join(f"shard {i}: {s['seconds']:.3f} s, {len(s['benchmarks'])} benchmarks: "
                                  f"{' '.join(s['benchmarks'])}" for i, s in summary.items()))
    return 0


def close(args: argparse.Namespace) -> int:
    target = Target(args)
    skip = [name.strip() for value in args.skip for name in value.split(",") if name.strip()]
    answer = target.api().close(target.project, target.run_id, skip)
    closed = answer.get("run_id") or target.run_id  # the attempt closed: the run's latest, or the one named
    Output(args).result(answer, f"run {closed} ({target.project}): {answer['state']}: {answer['message']}")
    return 0


def status(args: argparse.Namespace) -> int:
    from .report import every_benchmark, final_exit_code, regressions_past, render_text, wait_for_final

    if args.timeout < 0 or args.interval <= 0:
        raise ClientError("--timeout must be 0 or more seconds and --interval more than 0", USAGE)
    if args.benchmarks and args.format == "markdown":
        raise ClientError("--benchmarks lists benchmarks in text or JSON: the Markdown names the worst changes only, "
                          "and links the run's page", USAGE)
    target = Target(args)
    api = target.api()
    if args.wait:
        report, timed_out = wait_for_final(api, target.project, target.run_id, args.timeout, args.interval)
        if report is None:
            raise ClientError(f"run {target.run_id} of {target.project} did not appear within {args.timeout:g} s: "
                              "did any shard push to it?", TIMEOUT)
    elif args.format == "markdown" and not args.json:
        report, timed_out = None, False  # the Markdown is fetched as such below: no JSON read first
    else:
        report, timed_out = api.report(target.project, target.run_id), False
    if args.benchmarks:
        report["benchmarks"] = every_benchmark(api, report)
    regressed = None
    if args.fail_on_regression is not None and report is not None:
        regressed = regressions_past(api, report, args.fail_on_regression)
    if args.json or args.format == "json":
        print(json.dumps(report, indent=2))
    elif args.format == "markdown":
        print(api.report(target.project, target.run_id, "markdown"), end="")
    elif not args.quiet:
        print(render_text(report, every=args.benchmarks), end="")
    if timed_out:
        print(f"codspeed-client: timed out after {args.timeout:g}s waiting for run {target.run_id} to be final", file=sys.stderr)
    code = final_exit_code(report, timed_out) if args.wait else 0
    if regressed and code == 0:
        print(f"codspeed-client: {regressed}", file=sys.stderr)
        return REGRESSED
    return code


def env(args: argparse.Namespace) -> int:
    """Everything detected, and what is missing for a push: always exit 0, it only tells."""
    target = Target(args, check=False)
    ctx = target.ctx
    detected = {
        "provider": ctx.provider, "project": target.project, "run_id": target.run_id, "run_attempt": ctx.run_attempt,
        "commit": target.commit, "ref": ctx.ref, "head_ref": ctx.head_ref, "base_ref": ctx.base_ref,
        "base_commit": ctx.base_commit, "event": ctx.event, "fork": ctx.fork,
        "job": ctx.job, "shard": ctx.shard, "api_url": target.api_url, "token": "set" if target.token else None,
    }
    missing = target.missing() + ([] if target.commit else ["cannot tell the commit: pass --commit SHA"])
    lines = [f"{k}: {v if v is not None else '- (not detected)'}" for k, v in detected.items()]
    lines += [f"missing: {what}" for what in missing]
    Output(args).result({**detected, "missing": missing}, "\n".join(lines))
    return 0


def pack(args: argparse.Namespace) -> int:
    """The archive ``push --profile-folder`` sends, written to a file."""
    import shutil
    from pathlib import Path

    from . import bundle

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


COMMANDS = {"push": push, "open": open_run, "plan": plan, "durations": durations, "split": split_shards, "close": close, "status": status, "env": env, "pack": pack}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ClientError as exc:
        print(f"codspeed-client: error: {exc}", file=sys.stderr)
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc), "exit_code": exc.exit_code}))
        return exc.exit_code
    except Skipped as exc:
        print(f"::warning title=codspeed-client {args.command} skipped::{exc}")  # an annotation on the job
        return OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
