"""Which attempt of its run a run record is: a run forwarded and uploaded to again (a CI re-run) goes
on as its next attempt, ``<run>~N``."""

from dataclasses import dataclass

from .errors import Unprocessable

# GitHub re-runs a workflow run 50 times at most ("A workflow run can be re-run a maximum of 50 times"):
# an aggregator attempt is a CI attempt, so a run has as many as its CI allows, and no caller adds one.
MAX_ATTEMPTS = 51


def attempt_run_id(run_id: str, attempt: int) -> str:
    """The run id of a run's later attempt: ``<run>~N`` (attempt 1 is the run id itself)."""
    return run_id if attempt == 1 else f"{run_id}~{attempt}"


def base_run_id(run_id: str) -> str:
    """The run id an attempt belongs to (``7002~2`` -> ``7002``)."""
    return run_id.split("~", 1)[0]


def named_attempt(run_id: str) -> int | None:
    """The attempt a run id names (``7002~2``: 2), None when it names none (``7002``: the latest).
    An attempt past the limit is refused: no run ever has it."""
    _, tilde, attempt = run_id.partition("~")
    if not tilde:
        return None
    if int(attempt) > MAX_ATTEMPTS:
        raise Unprocessable(f"run {run_id} names attempt {attempt}, but a run has at most {MAX_ATTEMPTS} attempts")
    return int(attempt)


@dataclass(frozen=True)
class RunAttempt:
    """A run record's attempt: its number (``attempt_run_id``), the CI's attempt that opened it (GitHub's
    ``GITHUB_RUN_ATTEMPT``, as the CI vouched for it; None where it said none), and whether it is a next
    attempt (a re-run's, a late group's), whose inherited shards never complete it (``rerun``).
    ``services.run_attempts`` decides it."""

    number: int = 1
    ci: int | None = None
    rerun: bool = False
