"""Which attempt of a run an upload goes to: the run as first opened, or once it has ended, its
next attempt, which goes on from the one before (its groups, skips, counted shards, versions).

An attempt is the CI's: an upload whose CI attempt is known (what the CI vouched for) goes to the
aggregator attempt of that CI attempt, and never opens another; only where the CI said nothing does
an upload after a close open the run's one next attempt, which its inherited shards never complete."""

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..adapters.ledger import Runs, Shards
from ..domain.attempts import MAX_ATTEMPTS, attempt_run_id, base_run_id
from ..domain.errors import AttemptEnded, Conflict
from ..domain.identity import check_identity
from ..domain.records import ENDED, RunRecord
from ..settings import Settings


@dataclass
class RunAttempts:
    settings: Settings
    runs: Runs  # DynamoDB: the run item of each attempt, read or opened
    shards: Shards  # DynamoDB: the shards a next attempt inherits

    def current(
        self,
        opening: RunRecord,
        admit: Callable[[RunRecord], None] | None = None,
        parts: bool = True,
        late: bool = False,
    ) -> RunRecord:
        """The run an upload goes to: the run as first opened, or the aggregator attempt of the upload's
        CI attempt (``opening.attempt.ci``, as the CI vouched for it: a closing one still takes it, its
        close deciding by the CI's word whether to wait; one that ended raises ``AttemptEnded``), or,
        where the CI said nothing, once the run has ended or is closing, its next attempt. A next attempt
        keeps the groups, their manifests and the shards skipped, and starts with the shards counted
        before; it is complete once each of them was sent again ("re-run all jobs"), else its close, the
        CI's webhook or its deadline ends it, so the N jobs of a re-run are one attempt whatever N.
        ``admit``: an upload's checks, which refuse what a next attempt would refuse before that attempt
        is opened. ``parts``: False for a Buildkite build, forwarded as CodSpeed's runner uploads there
        whatever the stack's mode (``RunForward.by_executor``). ``late``: a bundle granted before the
        close that landed after its run ended, whose attempt is complete once it is counted."""
        base_id, previous = base_run_id(opening.run_id), None  # a push naming an attempt counts in the current one
        sends_parts = parts and self.settings.sends_parts(opening.project)  # its attempts keep it
        opening.forward = replace(opening.forward, sends_parts=sends_parts, by_executor=not parts)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            opening.run_id, opening.attempt = attempt_run_id(base_id, attempt), replace(opening.attempt, number=attempt)
            if previous is not None:
                existing = self.runs.run_record(opening.project, opening.run_id)  # one read, not a copy per upload
                if existing is not None:
                    if _takes(existing, opening.attempt.ci):
                        return existing
                    previous = existing
                    continue
                if admit is not None:  # what the next attempt would refuse opens no attempt
                    admit(previous)
                self._following_from(opening, previous, late)
            run, created = self.runs.open_run(opening)
            if created:
                return run
            if attempt == 1:
                check_identity(run.identity, opening.identity)
            if _takes(run, opening.attempt.ci):
                return run
            previous = run
        raise Conflict(
            f"run {base_id} of {opening.project} was forwarded {MAX_ATTEMPTS} times, as many attempts as its CI "
            "allows: it takes no more"
        )

    def _following_from(self, opening: RunRecord, previous: RunRecord, late: bool) -> None:
        """``opening`` as the attempt after ``previous``: its groups, manifests, skips and mode, and the
        shards it counted."""
        opening.groups = {**opening.groups, **previous.groups}
        opening.identity, opening.skipped, opening.declared = previous.identity, previous.skipped, previous.declared
        # a mode switched meanwhile never sends a benchmark twice in one run
        opening.forward = replace(
            opening.forward, sends_parts=previous.forward.sends_parts, by_executor=previous.forward.by_executor
        )
        opening.fork = opening.fork or previous.fork  # a fork's run's attempts are the fork's (its close)
        # one attempt for all a re-run's shards, not one per shard
        opening.attempt = replace(opening.attempt, rerun=not late, ci=opening.attempt.ci or _following(previous))
        # A run's report is its latest attempt's: its versions go on from the previous one's.
        opening.rev = opening.run_changes = previous.rev + 1
        opening.variants = tuple(sorted({*previous.variants, *opening.variants}))
        opening.group_counts = self.shards.inherit_arrived(opening.project, previous.run_id, opening.run_id)
        opening.arrived_count = sum(opening.group_counts.values())


def _takes(run: RunRecord, ci_attempt: int | None) -> bool:
    """Whether an upload of CI attempt ``ci_attempt`` (None: the CI said none) goes to ``run``. A run
    takes any upload until it is closed; then only its own CI attempt's, until it ends. One of its own
    CI attempt after it ended is refused: the run's next attempt is the CI's next attempt's, and no
    upload of an attempt that ended opens it."""
    if run.state not in ENDED and not run.close.requested:
        return True
    said = run.ci_attempt_said()
    if ci_attempt is None or said is None or ci_attempt > said:
        return False
    if run.state not in ENDED:
        return True
    raise AttemptEnded(
        f"run {run.run_id} of {run.project} was CI attempt {said}'s, and it ended ({run.state}) before this upload "
        f"of CI attempt {ci_attempt} was asked: its job came too late for it. Re-run the job: the CI's next attempt "
        "opens the run's next attempt"
    )


def _following(previous: RunRecord) -> int | None:
    """The least CI attempt an attempt opened after ``previous`` can be, where its upload said none: once
    the CI's webhook said every job of attempt N ended, only attempt N+1 or later can still upload."""
    closed = previous.close.by
    return closed.attempt + 1 if closed and closed.workflow and closed.attempt else None
