"""Who may act without a token: a pull request from a fork, whose jobs GitHub gives no secrets.
Its uploads and its open are taken for the projects the operator lists (``TokenlessProjects``)
once GitHub, asked with the stack's token, bears out what they claim (``domain.fork_pull_request``);
its close and its report, for the run those made, and no other."""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import requests

from codspeed_wire.api import CloseRequest

from ..adapters.github_pulls import GitHubPulls, OddAnswer
from ..adapters.ledger import Runs
from ..domain.attempts import base_run_id
from ..domain.closing import CiOrigin
from ..domain.errors import Conflict, Forbidden, HostFailed, HostUnreadable, Unauthorized
from ..domain.fork_pull_request import ClaimRefused, ForkClaim, check, running_besides
from ..settings import Settings

log = logging.getLogger(__name__)

NO_TOKEN = "missing Authorization header: send the aggregator's token"
VERIFIED_SECONDS = 60  # a claim GitHub bore out is taken again for this long: a run's shards ask once
REFUSED_SECONDS = 60  # and one it refused is refused again for this long: bogus claims cost GitHub nothing more
REMEMBERED = 1000


@dataclass
class ForkPullRequests:
    settings: Settings
    runs: Runs  # DynamoDB: whether a run is a fork's (opened by a claim that held)
    pulls: GitHubPulls | None  # GitHub, with the stack's token; None when the stack has none
    clock: Callable[[], float] = time.time
    _verified: dict[ForkClaim, tuple[float, CiOrigin]] = field(default_factory=dict, init=False)
    _refused: dict[ForkClaim, tuple[float, str]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def admit(  # noqa: PLR0913 -- the claim, and where it comes from
        self,
        project: str,
        ref: str | None,
        commit: str | None,
        run_id: str,
        *,
        required: bool = True,
        provider: str | None = "GITHUB",
        fresh: bool = False,
    ) -> CiOrigin | None:
        """Take a request without a token that claims a fork's pull request: the Actions run and its
        latest attempt, as GitHub vouched for them when it bore the claim out (the request's CI run and
        attempt, whatever it says). ``required``: refused when the stack cannot ask GitHub (the client's
        route); else, without a GitHub token, taken unverified (None): CodSpeed's runner drop-in, as before.
        ``fresh``: GitHub asked again, not what it said within the last minute (a re-run began since).
        ``provider``: where the repository lives (its metadata's ``repositoryProvider``): only GitHub's
        pull requests are asked of GitHub; another host's is refused where a check is wanted."""
        self._listed(project)
        if provider not in (None, "GITHUB") and (required or self.pulls is not None):
            raise Forbidden(
                f"a request without a token for {project} comes from {provider} (its metadata's "
                "repositoryProvider): the aggregator bears out a fork's pull request with GitHub's API only, "
                f"and has no check for {provider}'s: send the aggregator's token"
            )
        claim = self._claim(project, ref, commit, run_id)
        if self.pulls is None:
            if required:
                raise Forbidden(
                    f"a request without a token for {project} is checked with GitHub (the pull request "
                    "comes from a fork, the commit is its head), and this aggregator has no GitHub token: "
                    "its operator sets GitHubTokenParameter (a token that reads pull requests and Actions "
                    "runs)"
                )
            return None
        remembered = None if fresh else self._remembered(claim)
        if remembered is not None:
            return remembered
        vouched = self._asked(claim, self.pulls)
        with self._lock:
            self._verified[claim] = (self.clock() + VERIFIED_SECONDS, vouched)
        return vouched

    def _asked(self, claim: ForkClaim, pulls: GitHubPulls) -> CiOrigin:
        """The claim borne out by GitHub's answers (the Actions run and attempt it vouches for); a
        refusal, or GitHub's failure, said as what the caller can do about it."""
        project = claim.project
        try:
            return self._check(claim, pulls)
        except ClaimRefused as exc:
            raise self._refuse(claim, f"request without a token refused: {exc}") from exc
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if status in (401, 403):
                log.error(
                    "GitHub refused the stack's token (%s) on %s: tokenless requests cannot be checked", status, project
                )
                raise Forbidden(
                    f"GitHub refused the aggregator's token ({status}) when asked about {project}'s pull "
                    f"request {claim.number}: its operator gives GitHubTokenParameter a token that reads "
                    "pull requests and Actions runs"
                ) from exc
            raise HostFailed(
                f"GitHub answered {status} when asked about pull request {claim.number}: send the request again "
                "in a minute"
            ) from exc
        except requests.RequestException as exc:
            raise HostFailed(
                f"GitHub could not be reached ({type(exc).__name__}): send the request again in a minute"
            ) from exc
        except OddAnswer as exc:
            log.error("GitHub's answer about %s#%s is not of its documented form: %s", project, claim.number, exc)
            raise HostUnreadable(
                f"GitHub's answer about pull request {claim.number} could not be read: {exc}; the request "
                "without a token is not taken (the aggregator's operator sees it in the API's log)"
            ) from exc

    def _remembered(self, claim: ForkClaim) -> CiOrigin | None:
        """What GitHub vouched for lately for this claim; a refusal raised again for one it refused lately."""
        with self._lock:
            until, vouched = self._verified.get(claim, (0.0, None))
            if vouched is not None and until > self.clock():
                return vouched
            until, why = self._refused.get(claim, (0.0, ""))
        if until > self.clock():
            raise Forbidden(why)
        return None

    def _refuse(self, claim: ForkClaim, why: str) -> Forbidden:
        """A refusal, remembered for ``REFUSED_SECONDS``."""
        with self._lock:
            now = self.clock()
            if len(self._refused) >= REMEMBERED:  # what expired goes first: the map stays small
                self._refused = {c: r for c, r in self._refused.items() if r[0] > now}
            self._refused[claim] = (now + REFUSED_SECONDS, why)
        return Forbidden(why)

    @staticmethod
    def _check(claim: ForkClaim, pulls: GitHubPulls) -> CiOrigin:
        """GitHub's word on the claim: the pull request and the Actions run, and the commit itself when
        it is neither the head nor GitHub's latest merge commit (the base moved since the checkout).
        What it vouches for: the Actions run, and its latest attempt (a job runs in its run's latest)."""
        pull = pulls.pull(claim.project, claim.number)
        merge = None
        if pull is not None and pull.state == "open" and not pull.named_by(claim.commit):
            merge = pulls.merge_commit(claim.project, claim.commit, pull.base_ref)
        run = pulls.workflow_run(claim.project, claim.run_id)
        check(claim, pull, run, merge)
        return CiOrigin(claim.run_id, run.attempt if run else None)

    def admit_run(self, project: str, run_id: str) -> None:
        """A close or a report without a token: only of a run a fork's claim opened."""
        self._listed(project)
        if self.pulls is None:
            raise Unauthorized(
                f"{NO_TOKEN}: this aggregator has no GitHub token (GitHubTokenParameter) to bear out a pull "
                "request from a fork, so without a token no run is closed or read (a fork's run ends at its "
                "deadline, or when the CI webhook says the workflow finished)"
            )
        run = self.runs.run_record(project, base_run_id(run_id))
        if run is None or not run.fork:
            raise Unauthorized(
                f"{NO_TOKEN} (without one, only the run of a pull request from a fork can be closed or read)"
            )

    def vouched_close(self, request: CloseRequest) -> None:
        """A close without a token is taken only as far as the CI bears it out: once GitHub lists every job
        of the attempt it names as ended but the closing one, named by its runner (``ci_job``; a gate runs
        after the jobs it needs). Then it speaks for that attempt, and a grant of it with nothing in the
        bucket is missing at once. Anyone can say a fork's run, its attempt and a job's runner: GitHub's
        list decides, so a stranger's close can end no attempt whose jobs still run (refused, ``Conflict``)."""
        run, attempt, job = request.ci_run, request.ci_attempt, request.ci_job
        if run != base_run_id(request.run_id) or attempt is None or job is None:
            raise Conflict(
                f"a close without a token names its Actions run ({base_run_id(request.run_id)}), attempt and "
                "runner (codspeed-client close sends GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT and RUNNER_NAME from the "
                "gate job): without them it could end the run while its jobs still upload"
            )
        # asked each time, never remembered: a refusal kept a few seconds would refuse the gate's own close
        refusal = self._still_running(request.project, run, attempt, job)
        if refusal is not None:
            raise Conflict(refusal)

    def _still_running(self, project: str, run: str, attempt: int, job: str) -> str | None:
        """Why a close naming runner ``job`` cannot speak for the attempt yet (None: every other job ended)."""
        if self.pulls is None:  # admit_run refused it first
            raise Unauthorized(NO_TOKEN)
        try:
            jobs = self.pulls.attempt_jobs(project, run, attempt)
        except requests.RequestException as exc:
            raise HostFailed(
                f"GitHub could not list the jobs of Actions run {run}'s attempt {attempt} ({type(exc).__name__}): "
                "send the close again in a minute"
            ) from exc
        except OddAnswer as exc:
            raise HostUnreadable(
                f"GitHub's list of Actions run {run}'s attempt {attempt} could not be read: {exc}"
            ) from exc
        if jobs is None:
            return f"GitHub lists no attempt {attempt} of Actions run {run} in {project} (or more jobs than are read)"
        return running_besides(jobs, job)

    def _listed(self, project: str) -> None:
        if project not in self.settings.tokenless_projects:
            raise Unauthorized(
                f"{NO_TOKEN}: a request without one (a pull request from a fork) is taken for the "
                "projects in the aggregator's TokenlessProjects parameter, and "
                f"{project} is not one of them"
            )

    @staticmethod
    def _claim(project: str, ref: str | None, commit: str | None, run_id: str) -> ForkClaim:
        try:
            return ForkClaim.of(project, ref, commit, run_id)
        except ClaimRefused as exc:
            raise Forbidden(str(exc)) from exc
