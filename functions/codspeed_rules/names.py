"""Identifiers that travel on the wire and end up in S3 keys and DynamoDB keys."""

from __future__ import annotations

import re

# owner/repo, or GitLab's group/subgroup/.../repo (at most 20 levels of subgroups)
SEGMENT = r"[A-Za-z0-9_.-]{1,100}"
PROJECT_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{1,21}}$"
OWNER_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{0,20}}$"
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$"
SHARD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.=+@-]{0,127}$"
COMMIT_PATTERN = r"^[0-9a-fA-F]{7,64}$"


def has_dot_segment(value: str) -> bool:
    return any(part in (".", "..") for part in value.split("/"))


def is_project(value: str) -> bool:
    return bool(re.match(PROJECT_PATTERN, value)) and not has_dot_segment(value)


def is_run_id(value: str) -> bool:
    return bool(re.match(RUN_ID_PATTERN, value)) and not has_dot_segment(value)


def is_shard_name(value: str) -> bool:
    return bool(re.match(SHARD_PATTERN, value)) and not has_dot_segment(value)


def is_commit(value: str) -> bool:
    return bool(re.match(COMMIT_PATTERN, value))
