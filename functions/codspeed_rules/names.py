"""Identifiers that travel on the wire and end up in S3 keys and DynamoDB keys."""

from __future__ import annotations

import hashlib
import re
from typing import NewType

# owner/repo, or GitLab's group/subgroup/.../repo (at most 20 levels of subgroups)
SEGMENT = r"[A-Za-z0-9_.-]{1,100}"
PROJECT_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{1,21}}$"
OWNER_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{0,20}}$"
ATTEMPT_PATTERN = r"[1-9][0-9]{0,3}"  # a run's attempt N, 1 to 9999
RUN_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.:+-]{{0,127}}(?:~{ATTEMPT_PATTERN})?$"  # ~N: the run's attempt N
_SHARD = r"[A-Za-z0-9][A-Za-z0-9_.=+@-]{0,127}"
SHARD_PATTERN = rf"^{_SHARD}$"
# a CI's own run: GitHub's run id, GitLab's pipeline id, CircleCI's workflow id, Buildkite's build id
CI_RUN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
EXECUTOR_PATTERN = r"[a-z][a-z0-9_-]{0,31}"  # valgrind, walltime, memory: what a CodSpeed runner writes
# Key spaces that can never meet (invariant 15): a runner job's storage key holds JOB_MARK, which no
# pushed shard's name may hold (``_SHARD``), so no push can be spelled like a runner job's shard.
JOB_MARK = "!"
JOB_KEY_PATTERN = r"[A-Za-z0-9_.=+-]{1,89}![0-9a-f]{10}"  # ``drop_in.job_key``: a slug of its runPartId, a digest
# A shard as the aggregator keys it: a pushed shard is its name and executor (``shard_key``), a runner
# job its ``job_key``
SHARD_KEY_PATTERN = rf"^(?:{_SHARD}(?:~{EXECUTOR_PATTERN})?|{JOB_KEY_PATTERN})$"
SKIP_PATTERN = rf"^(?:{_SHARD}|{JOB_KEY_PATTERN})$"  # what a close may skip: a pushed shard's name, a runner job's key
# A shard as its readers know it (a runner job as its CI shows it: ``benchmarks [shard 1, job 1/4]``),
# never its storage key: every sentence that names shards takes these (``summary.listed``), and only the
# report's ``ShardEntry.shown`` and the domain's ``report.shown_as`` make them.
Shown = NewType("Shown", str)
KEYED_AS_NAME = "valgrind"  # a pushed shard of this executor, the default, is keyed by its name alone
COMMIT_PATTERN = r"^[0-9a-fA-F]{7,64}$"
MAX_ANCESTORS = 50  # of a base commit, sent for the baseline: about two weeks of a busy main
# a CI run's page, linked from reports: no space, bracket, parenthesis or quote, so one inert link in Markdown
CI_URL_PATTERN = r"^https?://[^\s()<>\[\]\"'`]{1,2040}$"


def has_dot_segment(value: str) -> bool:
    return any(part in (".", "..") for part in value.split("/"))


def is_project(value: str) -> bool:
    return bool(re.fullmatch(PROJECT_PATTERN, value)) and not has_dot_segment(value)


def is_run_id(value: str) -> bool:
    return bool(re.fullmatch(RUN_ID_PATTERN, value)) and not has_dot_segment(value)


def run_id_problem(value: str) -> str | None:
    """What is wrong with a run id, in one sentence; None when it is one."""
    if is_run_id(value):
        return None
    base, tilde, _ = value.partition("~")
    if tilde and is_run_id(base):
        return attempt_problem(value)
    return f"{value!r} is not a run id: letters, digits and _.:+- only (up to 128), then ~N for attempt N"


def attempt_problem(value: str) -> str | None:
    """What is wrong with the attempt a run id names (``<run>~N``), in one sentence; None when it
    names none, or one from 1 to 9999. (A run the aggregator keyed itself may hold other characters.)"""
    _, tilde, attempt = value.partition("~")
    if not tilde or re.fullmatch(ATTEMPT_PATTERN, attempt):
        return None
    if not attempt:
        return f"{value!r} ends with '~' but names no attempt: give <run>~N, N from 1"
    if re.fullmatch(r"0+", attempt):
        return f"{value!r} names attempt 0: attempts count from 1 (<run> itself is attempt 1)"
    return f"{value!r} names attempt {attempt!r}: an attempt is a number from 1 to 9999"


def is_shard_name(value: str) -> bool:
    return bool(re.fullmatch(SHARD_PATTERN, value)) and not has_dot_segment(value)


def shard_key(name: str, executor: str) -> str:
    """How a pushed shard is keyed: by its name and executor, so that two executors' shard 1 are two
    shards (``1`` and ``1~walltime``). ``~`` is in no shard name, nor in a runner's shard key."""
    return name if executor == KEYED_AS_NAME else f"{name}~{executor}"


def split_shard_key(key: str) -> tuple[str, str | None]:
    """A shard key's name and executor (None: the key alone says none, so valgrind or a runner's)."""
    name, tilde, executor = key.partition("~")
    return name, (executor if tilde else None)


def is_ci_url(value: str) -> bool:
    return bool(re.fullmatch(CI_URL_PATTERN, value))


def is_commit(value: str) -> bool:
    return bool(re.fullmatch(COMMIT_PATTERN, value))


_PULL = re.compile(r"refs/pull/(\d+)/(?:merge|head)")


def pull_request(ref: str | None) -> int | None:
    """The pull request a run's ref names (GitHub's ``refs/pull/N/merge``), or None."""
    found = _PULL.fullmatch(ref or "")
    return int(found.group(1)) if found else None


def gitlab_runner_run_id(commit: str, ref: str | None) -> str:
    """The run a GitLab pipeline's CodSpeed runner jobs upload to: each runner sends its job's own id,
    so the aggregator names their run by commit and ref, and the client finds it by the same."""
    return f"gl-{commit[:12].lower()}-{hashlib.sha256((ref or '').encode()).hexdigest()[:8]}"
