"""A tokenless request's claim: a pull request from a fork, its head commit and the GitHub Actions
run that benchmarked it. GitHub gives a fork's jobs no secrets, so the claim is all such a job can
show; what GitHub says of the pull request and of the run decides whether it holds."""

from dataclasses import dataclass

from codspeed_rules.names import pull_request


@dataclass(frozen=True)
class ForkClaim:
    project: str
    number: int  # the pull request, from the ref (refs/pull/N/merge)
    commit: str  # what the job benchmarked: the pull request's head, or GitHub's merge commit of it (the runner's)
    run_id: str  # the CI run (GITHUB_RUN_ID) every shard of the run names

    @classmethod
    def of(cls, project: str, ref: str | None, commit: str | None, run_id: str) -> "ForkClaim":
        """The claim a request makes, or the sentence that says why it makes none."""
        number = pull_request(ref)
        if number is None:
            raise ClaimRefused(
                f"a request without a token is taken for a pull request's ref only (refs/pull/N/merge), "
                f"not {ref!r}: a branch's run may become the baseline, and needs the aggregator's token"
            )
        if not commit:
            raise ClaimRefused("a request without a token names the pull request's head commit: none was given")
        return cls(project, number, commit.lower(), run_id)


class ClaimRefused(Exception):
    """The claim does not hold; the message says which part of it, as GitHub has it."""


@dataclass(frozen=True)
class PullRequest:
    """A pull request as GitHub's ``GET /repos/{project}/pulls/{number}`` has it."""

    state: str  # open, closed
    head_sha: str
    head_repository: str | None  # None: the fork was deleted
    base_repository: str
    base_ref: str = ""  # the base branch
    merge_commit_sha: str | None = None  # GitHub's latest test merge commit (recomputed as the base moves)

    def named_by(self, commit: str) -> bool:
        """Whether ``commit`` is this pull request's head or GitHub's latest merge commit of it: no
        more need be asked."""
        return commit in (self.head_sha.lower(), (self.merge_commit_sha or "").lower())


@dataclass(frozen=True)
class MergeCommit:
    """A commit as GitHub has it, asked when a claim names neither the head nor the latest merge
    commit (the base moved since the job checked out ``refs/pull/N/merge``)."""

    parents: tuple[str, ...]
    first_parent_on_base: bool  # its first parent is on the pull request's base branch


@dataclass(frozen=True)
class WorkflowRun:
    """A GitHub Actions run as ``GET /repos/{project}/actions/runs/{id}`` has it."""

    head_sha: str
    head_repository: str | None
    completed: bool = False  # every job of it ended (its ``status``): nothing of it can still upload
    attempt: int | None = None  # its latest attempt (``run_attempt``): a re-run's jobs are the latest's


@dataclass(frozen=True)
class WorkflowJob:
    """One job of an Actions run's attempt, as ``GET …/actions/runs/{id}/attempts/{n}/jobs`` lists it."""

    name: str
    runner: str | None  # the runner it ran on (``runner_name``; RUNNER_NAME in the job): how a gate names itself
    completed: bool


def running_besides(jobs: list[WorkflowJob], closing: str) -> str | None:
    """Why the attempt whose jobs these are has not ended but for the job closing it, which runs on runner
    ``closing`` (a gate runs after the jobs it needs); None when it has: no other job of it can upload."""
    running = [job for job in jobs if not job.completed]
    others = [job for job in running if job.runner != closing]
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        return (
            f"GitHub lists job {others[0].name!r}{more} of that attempt as still running: a close without a token is "
            "taken once every job of its attempt but the closing one has ended (a gate runs after the jobs it needs)"
        )
    if not running:
        return (
            f"GitHub lists no job of that attempt running on runner {closing!r}: a close without a token comes from "
            "a job of the attempt it closes, still running"
        )
    return None


def check(
    claim: ForkClaim, pull: PullRequest | None, run: WorkflowRun | None, merge: MergeCommit | None = None
) -> None:
    """Whether GitHub bears the claim out: the pull request is open and comes from a fork; the commit
    is its head, or a merge commit of its head into its base branch (what CodSpeed's runner sends: the
    checkout of ``refs/pull/N/merge``; ``merge``, when the commit is not GitHub's latest); and the run
    is an Actions run of its head from that fork. A pull request of the project's own branches has the
    token, and needs none of this. The refusal says which check failed."""
    at = f"{claim.project}#{claim.number}"
    if pull is None:
        raise ClaimRefused(f"GitHub has no pull request {at}")
    if pull.state != "open":
        raise ClaimRefused(
            f"pull request {at} is {pull.state}: only an open pull request's run is taken without a token"
        )
    if pull.head_repository == pull.base_repository:
        raise ClaimRefused(
            f"pull request {at} comes from a branch of {claim.project}, not from a fork: its jobs have "
            "the project's secrets, so they send the aggregator's token"
        )
    if not pull.named_by(claim.commit):
        _check_merge(claim, pull, merge, at)
    if run is None:
        raise ClaimRefused(
            f"GitHub has no Actions run {claim.run_id} in {claim.project}: a run without a token is "
            "the pull request's own workflow run (GITHUB_RUN_ID)"
        )
    if run.head_sha.lower() != pull.head_sha.lower() or run.head_repository != pull.head_repository:
        raise ClaimRefused(
            f"Actions run {claim.run_id} of {claim.project} did not run pull request {at}'s head "
            f"{pull.head_sha[:12]}: a run without a token is the pull request's own workflow run"
        )
    if run.completed:
        raise ClaimRefused(
            f"Actions run {claim.run_id} of {claim.project} is completed: a run without a token takes uploads "
            "only while its jobs run (a re-run of its jobs starts it again)"
        )


def _check_merge(claim: ForkClaim, pull: PullRequest, merge: MergeCommit | None, at: str) -> None:
    """A commit that is not the head: taken when it merges the head (its second parent) into the base
    branch (its first parent, on that branch)."""
    head = pull.head_sha.lower()
    if merge is None:
        raise ClaimRefused(
            f"commit {claim.commit[:12]} is neither the head of pull request {at} ({head[:12]}) nor a "
            "commit GitHub has: a pushed commit that is no longer the head is not benchmarked without a token"
        )
    if len(merge.parents) != 2 or merge.parents[1].lower() != head:
        raise ClaimRefused(
            f"commit {claim.commit[:12]} is not the head of pull request {at} ({head[:12]}), nor a merge "
            f"of it (its parents: {', '.join(p[:12] for p in merge.parents) or 'none'}): a pushed commit that "
            "is no longer the head is not benchmarked without a token"
        )
    if not merge.first_parent_on_base:
        raise ClaimRefused(
            f"commit {claim.commit[:12]} merges pull request {at}'s head into {merge.parents[0][:12]}, which "
            f"is not on its base branch {pull.base_ref!r}: only a merge into the base branch is taken"
        )
