"""Which attempt of a run an upload goes to: the run as first opened, or once it has ended, its
next attempt, which goes on from the one before (its groups, skips, counted shards, versions)."""

from collections.abc import Callable
from dataclasses import dataclass

from ..adapters.ledger import Runs, Shards
from ..domain.errors import Conflict
from ..domain.identity import check_identity
from ..domain.ledger import ENDED, RunRecord, attempt_run_id, base_run_id
from ..settings import Settings


@dataclass
class RunAttempts:
    settings: Settings
    runs: Runs  # DynamoDB: the run item of each attempt, read or opened
    shards: Shards  # DynamoDB: the shards a next attempt inherits

    def current(
        self, opening: RunRecord, admit: Callable[[RunRecord], None] | None = None, parts: bool = True
    ) -> RunRecord:
        """The run an upload goes to: the run as first opened, or when that one has ended or is
        closing (forwarded, being finalized, or told its jobs ended: a CI re-run, or a shard that came
        too late), its next attempt. A next attempt keeps the groups, their manifests and the shards skipped, and
        starts with the shards counted before, so it is complete, and forwarded, as soon as the
        re-run shards (or a group that came late) are in. ``admit``: an upload's checks, which refuse
        what a next attempt would refuse before that attempt is opened. ``parts``: False for a run
        forwarded merged whatever the stack's mode (a Buildkite build's runner jobs)."""
        base_id, previous = base_run_id(opening.run_id), None  # a push naming an attempt counts in the current one
        opening.sends_parts = parts and self.settings.sends_parts(opening.project)  # its attempts keep it
        for attempt in range(1, self.settings.max_attempts + 1):
            opening.run_id, opening.attempt = attempt_run_id(base_id, attempt), attempt
            if previous is not None:
                existing = self.runs.run_record(opening.project, opening.run_id)  # one read, not a copy per upload
                if existing is not None:
                    if _takes_uploads(existing):
                        return existing
                    previous = existing
                    continue
                if admit is not None:  # what the next attempt would refuse opens no attempt
                    admit(previous)
                opening.groups = {**opening.groups, **previous.groups}
                opening.identity, opening.skipped, opening.declared = (
                    previous.identity,
                    previous.skipped,
                    previous.declared,
                )
                opening.sends_parts = (
                    previous.sends_parts
                )  # a mode switched meanwhile never sends a benchmark twice in one run
                opening.fork = opening.fork or previous.fork  # a fork's run's attempts are the fork's (its close)
                # a later CI attempt's re-run: one attempt for all its shards, not one per shard
                opening.rerun = bool(opening.ci_attempt and opening.ci_attempt > (previous.ci_attempt or 1))
                # A run's report is its latest attempt's: its versions go on from the previous one's.
                opening.rev = opening.run_changes = previous.rev + 1
                opening.variants = tuple(sorted({*previous.variants, *opening.variants}))
                opening.group_counts = self.shards.inherit_arrived(opening.project, previous.run_id, opening.run_id)
                opening.arrived_count = sum(opening.group_counts.values())
            run, created = self.runs.open_run(opening)
            if created:
                return run
            if attempt == 1:
                check_identity(run.identity, opening.identity)
            if _takes_uploads(run):
                return run
            previous = run
        raise Conflict(
            f"run {base_id} of {opening.project} was forwarded {self.settings.max_attempts} times: "
            "it takes no more attempts"
        )


def _takes_uploads(run: RunRecord) -> bool:
    """A run takes an upload until it is closed: a close says its jobs have ended, so what is asked
    after it is a later job's (a re-run's), and never holds the close."""
    return run.state not in ENDED and not run.closing
