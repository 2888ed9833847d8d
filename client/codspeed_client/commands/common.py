"""What the commands share: the run and aggregator flags, where to send (``Target``), how to print
(``Output``), and the readers of names and listed files."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from ..errors import CONFIG, USAGE, ClientError, Skipped

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any

    from codspeed_rules.report_json import ReportJson

    from ..api import AggregatorApi
    from ..ci import CiContext

NO_COMMIT = "cannot tell the commit: pass --commit SHA"


def add_common(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run and aggregator (detected from the CI and git when absent)")
    group.add_argument("--api-url", help="aggregator URL (env CODSPEED_AGGREGATOR_URL)")
    group.add_argument(
        "--token", help="aggregator token (env CODSPEED_AGGREGATOR_TOKEN; never CodSpeed's own CODSPEED_TOKEN)"
    )
    group.add_argument("--project", help="owner/repo (GitLab: group/subgroup/repo)")
    group.add_argument("--run-id", help="the CI run every shard belongs to")
    group.add_argument("--commit", help="commit SHA")
    group.add_argument("--ref", help="git ref, e.g. refs/heads/main")
    group.add_argument("--base-ref", help="the branch a pull request targets")
    group.add_argument(
        "--base-commit",
        help="the base branch's commit the change is built on: its run is the baseline "
        "(detected from GitHub's and GitLab's pull requests)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--quiet", action="store_true", help="print errors only")
    out.add_argument("--json", action="store_true", help="print one JSON object (errors too)")


def ci_origin(ctx: CiContext) -> dict[str, Any]:
    """The CI run and attempt this job is in, when the CI says them (whatever ``--run-id`` says): every
    shard of one CI re-run joins one attempt of the run, and a close from this CI run says its jobs ended."""
    from codspeed_rules.names import CI_RUN_PATTERN

    origin: dict[str, Any] = {}
    if ctx.run_id and re.match(CI_RUN_PATTERN, ctx.run_id):
        origin["ci_run"] = ctx.run_id
    if ctx.run_attempt and ctx.run_attempt.isdigit() and int(ctx.run_attempt) >= 1:
        origin["ci_attempt"] = int(ctx.run_attempt)
    return origin


class Output:
    def __init__(self, args: argparse.Namespace) -> None:
        self.quiet = getattr(args, "quiet", False)
        self.json = getattr(args, "json", False)

    def result(self, data: dict[str, Any], text: str) -> None:
        if self.json:
            print(json.dumps(data, indent=2))
        elif not self.quiet:
            print(text)

    def say(self, text: str) -> None:
        """A line for the job's log, on stderr (stdout is data another step may read)."""
        if not self.quiet:
            print(text, file=sys.stderr)

    @staticmethod
    def warn(text: str) -> None:
        """A warning, on stderr (stdout is data another step may read), as a GitHub annotation."""
        print(f"::warning title=codspeed-client::{text}", file=sys.stderr)


def _where_to_send(args: argparse.Namespace) -> tuple[str, str | None]:
    """The aggregator's URL ("" where nothing says: a command that needs one says which, ``missing``)
    and its token: a secret pasted with its line break (a CI secret, a file read into the variable) is the token,
    and so is one given as its header says it (``Bearer tok``), as the aggregator takes it."""
    url: str = args.api_url or os.environ.get("CODSPEED_AGGREGATOR_URL") or ""
    token = (args.token or os.environ.get("CODSPEED_AGGREGATOR_TOKEN") or "").strip()
    return url, token.removeprefix("Bearer ").strip() or None


def _which_run(args: argparse.Namespace, ctx: CiContext) -> tuple[str, str, str]:
    """The project, run id and commit ("" where nothing says), the flags over the CI's; the CI's
    refs and base commit too, kept in ``ctx``."""
    ctx.ref = args.ref or ctx.ref
    ctx.base_ref = args.base_ref or ctx.base_ref
    ctx.base_commit = getattr(args, "base_commit", None) or ctx.base_commit
    return args.project or ctx.project or "", args.run_id or ctx.run_id or "", args.commit or ctx.commit or ""


class Target:
    """Where to send, and which run: flags first, then the environment, then the CI and git.
    Values the aggregator would refuse are usage errors here, said in a sentence."""

    def __init__(
        self, args: argparse.Namespace, *, need_api: bool = True, check: bool = True, need_run: bool = True
    ) -> None:
        from ..ci_providers import detect

        self.ctx, self.need_run = detect(), need_run
        self.api_url, self.token = _where_to_send(args)
        self.project, self.run_id, self.commit = _which_run(args, self.ctx)
        self.runner_run_id = self._runner_run_id(args)
        self.retries = os.environ.get("CODSPEED_RETRIES", "5")
        # GitHub gives a fork's pull request no secrets: its requests go without a token, and the
        # aggregator checks with GitHub that they are that pull request's (TokenlessProjects)
        self.tokenless = not self.token and bool(self.ctx.fork) and self.ctx.provider == "GITHUB_ACTIONS"
        if check:
            self._check(need_api)

    def _runner_run_id(self, args: argparse.Namespace) -> str | None:
        """On GitLab a pipeline's CodSpeed runner jobs upload to a run named by commit and ref (each
        runner sends its job's own id): the run a gate means when the pipeline's own has no shard."""
        if self.ctx.provider != "GITLAB_CI" or args.run_id or not self.commit:
            return None
        from codspeed_rules.names import gitlab_runner_run_id

        return gitlab_runner_run_id(self.commit, self.ctx.ref)

    def runs(self) -> list[str]:
        """The runs this job may mean, the first that exists being it: the run id, then on GitLab the
        run the pipeline's runner jobs made."""
        return [self.run_id, *([self.runner_run_id] if self.runner_run_id else [])]

    def settle_run(self, api: AggregatorApi) -> ReportJson | None:
        """The report of the first of ``runs`` that exists, that run becoming the target's; None when none does."""
        for run_id in self.runs():
            if (report := api.report(self.project, run_id, missing_ok=True)) is not None:
                self.run_id = run_id
                return report
        return None

    def missing(self, need_api: bool = True) -> list[str]:
        found = [
            (self.project, "cannot tell the project: pass --project owner/repo"),
            (
                self.run_id or not self.need_run,
                "cannot tell the run id: pass --run-id, the same in every shard of the run",
            ),
        ]
        if need_api:
            found[:0] = [
                (self.api_url, "no aggregator URL: pass --api-url or set CODSPEED_AGGREGATOR_URL"),
                (self.token or self.tokenless, "no token: pass --token or set CODSPEED_AGGREGATOR_TOKEN"),
            ]
        return [what for value, what in found if not value]

    def _check(self, need_api: bool) -> None:
        self._check_names()
        if need_api:
            self._check_api()
        if not self.retries.isdigit():
            raise ClientError(f"CODSPEED_RETRIES={self.retries!r} is not a number of tries", USAGE)
        if need_api and not self.token and self.ctx.fork and not self.tokenless:
            raise Skipped(
                f"this merge request comes from a fork ({self.ctx.fork}), whose jobs get no secrets: with no "
                "aggregator token nothing was sent (a GitHub Actions pull request from a fork is sent without "
                "one, and checked with GitHub)"
            )
        if missing := self.missing(need_api):
            raise ClientError(missing[0], CONFIG)

    def _check_names(self) -> None:
        """The project, run id and commits as the aggregator would take them."""
        from codspeed_rules.names import is_commit, is_project, run_id_problem

        if self.project and not is_project(self.project):
            raise ClientError(f"--project {self.project!r} is not owner/repo (or group/subgroup/repo on GitLab)", USAGE)
        if self.run_id and (problem := run_id_problem(str(self.run_id))):
            raise ClientError(f"--run-id {problem}", USAGE)
        for flag, commit in (("--commit", self.commit), ("--base-commit", self.ctx.base_commit)):
            if commit and not is_commit(commit):
                raise ClientError(f"{flag} {commit!r} is not a commit SHA (7 to 64 hex digits)", USAGE)

    def _check_api(self) -> None:
        """The aggregator's URL and a token an HTTP header can carry."""
        if self.api_url and not re.match(r"^https?://[^/\s]+", self.api_url):
            raise ClientError(
                f"--api-url {self.api_url!r} is not an http(s):// URL: give the aggregator's ApiUrl", USAGE
            )
        if self.token and not re.fullmatch(r"[\x21-\x7e]+", self.token):
            raise ClientError(
                "the token holds a space, a control or a non-ASCII character, which an HTTP header cannot "
                "carry: check CODSPEED_AGGREGATOR_TOKEN (or --token) for a pasted line break",
                CONFIG,
            )

    def need_commit(self) -> str:
        if not self.commit:
            raise ClientError(NO_COMMIT, CONFIG)
        return self.commit

    def api(self) -> AggregatorApi:
        from ..api import AggregatorApi

        return AggregatorApi(self.api_url, self.token, attempts=int(self.retries))


def where_from(ctx: CiContext, commit: str) -> dict[str, Any]:
    """What a run's first request says of its CI run, of what people are shown and of its base, each
    only when known: the CI run's page, the pull request's head (where ``commit`` is GitHub's merge
    commit of it), the base commit and the commits before it."""
    from codspeed_rules.names import MAX_ANCESTORS, is_ci_url, is_commit

    from ..git import ancestors

    found: dict[str, Any] = {"ci_url": ctx.ci_url} if ctx.ci_url and is_ci_url(ctx.ci_url) else {}
    if ctx.head_commit and is_commit(ctx.head_commit) and ctx.head_commit.lower() != commit.lower():
        found["head_commit"] = ctx.head_commit
    if ctx.base_commit:
        found["base_commit"] = ctx.base_commit
        if before := ancestors(ctx.repository_root, ctx.base_commit, MAX_ANCESTORS):
            found["base_ancestors"] = before
    return found


def listed(flag: str, path: str) -> list[str]:
    """A file's lines, one item each, blank ones left out ('-': standard input)."""
    try:
        with sys.stdin if path == "-" else open(path, encoding="utf-8") as lines:
            return [line.strip() for line in lines if line.strip()]
    except OSError as exc:
        raise ClientError(f"cannot read {flag} {path}: {exc.strerror}", USAGE) from exc
    except UnicodeDecodeError as exc:
        raise ClientError(f"{flag} {path} is not text (UTF-8): give a file of one path per line", USAGE) from exc


def shard_names(flag: str, value: str) -> list[str]:
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
