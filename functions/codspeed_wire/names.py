"""Identifiers that travel on the wire, as pydantic types (the patterns: ``codspeed_rules.names``)."""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from codspeed_rules.names import (
    OWNER_PATTERN,
    PROJECT_PATTERN,
    SEGMENT,
    SHARD_PATTERN,
    SKIP_PATTERN,
    has_dot_segment,
    run_id_problem,
)


def _no_dot_segments(value: str) -> str:
    if has_dot_segment(value):
        raise ValueError("must not contain '.' or '..' path segments")
    return value


Owner = Annotated[str, StringConstraints(pattern=OWNER_PATTERN), AfterValidator(_no_dot_segments)]
Segment = Annotated[str, StringConstraints(pattern=rf"^{SEGMENT}$"), AfterValidator(_no_dot_segments)]
Project = Annotated[str, StringConstraints(pattern=PROJECT_PATTERN), AfterValidator(_no_dot_segments)]


def _run_id(value: str) -> str:
    if problem := run_id_problem(value):
        raise ValueError(problem)
    return value


RunId = Annotated[str, AfterValidator(_run_id)]
ShardName = Annotated[str, StringConstraints(pattern=SHARD_PATTERN), AfterValidator(_no_dot_segments)]
SkippedShard = Annotated[str, StringConstraints(pattern=SKIP_PATTERN), AfterValidator(_no_dot_segments)]
