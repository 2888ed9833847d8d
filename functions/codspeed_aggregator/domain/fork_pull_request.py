"""A tokenless request's claim: a pull request from a fork, its head commit and the GitHub Actions
run that benchmarked it. GitHub gives a fork's jobs no secrets, so the claim is all such a job can
show; what GitHub says of the pull request and of the run decides whether it holds."""

from dataclasses import dataclass

from codspeed_rules.names import pull_request


@dataclass(frozen=True)
class ForkClaim:
    project: str
    number: int  # the pull request, from the ref (refs/pull/N/merge)
    commit: str  # the pull request's head, as the job benchmarked it
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


@dataclass(frozen=True)
class WorkflowRun:
    """A GitHub Actions run as ``GET /repos/{project}/actions/runs/{id}`` has it."""

    head_sha: str
    head_repository: str | None


def check(claim: ForkClaim, pull: PullRequest | None, run: WorkflowRun | None) -> None:
    """Whether GitHub bears the claim out: the pull request is open and comes from a fork, the commit is
    its head, and the run is an Actions run of that commit from that fork. A pull request of the
    project's own branches has the token, and needs none of this."""
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
    if pull.head_sha.lower() != claim.commit:
        raise ClaimRefused(
            f"commit {claim.commit[:12]} is not the head of pull request {at} ({pull.head_sha[:12]}): "
            "a pushed commit that is no longer the head is not benchmarked without a token"
        )
    if run is None:
        raise ClaimRefused(
            f"GitHub has no Actions run {claim.run_id} in {claim.project}: a run without a token is "
            "the pull request's own workflow run (GITHUB_RUN_ID)"
        )
    if run.head_sha.lower() != claim.commit or run.head_repository != pull.head_repository:
        raise ClaimRefused(
            f"Actions run {claim.run_id} of {claim.project} did not run pull request {at}'s head "
            f"{claim.commit[:12]}: a run without a token is the pull request's own workflow run"
        )
