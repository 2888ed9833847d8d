"""Identifiers that travel on the wire and end up in S3 keys and DynamoDB keys."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

# owner/repo, or GitLab's group/subgroup/.../repo (at most 20 levels of subgroups)
SEGMENT = r"[A-Za-z0-9_.-]{1,100}"
PROJECT_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{1,21}}$"
OWNER_PATTERN = rf"^{SEGMENT}(?:/{SEGMENT}){{0,20}}$"
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$"
SHARD_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.=+@-]{0,127}$"


def _no_dot_segments(value: str) -> str:
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError("must not contain '.' or '..' path segments")
    return value


Owner = Annotated[str, StringConstraints(pattern=OWNER_PATTERN), AfterValidator(_no_dot_segments)]
Segment = Annotated[str, StringConstraints(pattern=rf"^{SEGMENT}$"), AfterValidator(_no_dot_segments)]
Project = Annotated[str, StringConstraints(pattern=PROJECT_PATTERN), AfterValidator(_no_dot_segments)]
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN), AfterValidator(_no_dot_segments)]
ShardName = Annotated[str, StringConstraints(pattern=SHARD_PATTERN), AfterValidator(_no_dot_segments)]
