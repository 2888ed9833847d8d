"""Identifiers that travel on the wire, as pydantic types (the patterns: ``codspeed_rules.names``)."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from codspeed_rules.names import OWNER_PATTERN, PROJECT_PATTERN, RUN_ID_PATTERN, SEGMENT, SHARD_PATTERN, has_dot_segment


def _no_dot_segments(value: str) -> str:
    if has_dot_segment(value):
        raise ValueError("must not contain '.' or '..' path segments")
    return value


Owner = Annotated[str, StringConstraints(pattern=OWNER_PATTERN), AfterValidator(_no_dot_segments)]
Segment = Annotated[str, StringConstraints(pattern=rf"^{SEGMENT}$"), AfterValidator(_no_dot_segments)]
Project = Annotated[str, StringConstraints(pattern=PROJECT_PATTERN), AfterValidator(_no_dot_segments)]
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN), AfterValidator(_no_dot_segments)]
ShardName = Annotated[str, StringConstraints(pattern=SHARD_PATTERN), AfterValidator(_no_dot_segments)]
