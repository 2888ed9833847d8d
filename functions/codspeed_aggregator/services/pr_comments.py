"""The sticky pull-request comment (a GitLab merge request's note): posted once per pull request
(found again by its id, stored with a conditional write, so concurrent publishers never post
two), then edited in place across every push, workflow run and attempt: it shows the newest run
(a report of an older one that finishes later never overwrites it), the others folded into one
line with their links; at most once per ``quiet_seconds`` while the report is partial (GitHub's
secondary rate limits, GitLab's notes rate limit: a 1000-shard run is not 1000 edits), and always
for the final report. Where the repository lives (the run's ``repositoryProvider``) says which
host it goes to."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from requests import HTTPError, RequestException, Response

from codspeed_rules.backoff import Retry, retryable, with_retries
from codspeed_rules.names import pull_request
from codspeed_wire.report import Report

from ..adapters.github_comments import GitHubComments
from ..adapters.gitlab_notes import GitLabNotes
from ..adapters.ledger import Comments
from ..domain.pr_comment import PullRequestRef, Shown, comment_body, earlier_runs

T = TypeVar("T")

log = logging.getLogger(__name__)

CLAIM_SECONDS = 60  # a claim with no comment posted after this was its poster's last act: taken over
POSTED_WAIT_SECONDS = 10  # the final report waits this long for a concurrent first post, to edit it
FINAL_TRIES = 3  # the final report is always written: a host's failure is retried (1 s, then 2 s later)
REFUSED_SECONDS = 600  # a project whose token the host refused gets no comment for this long, then is tried again


@dataclass
class PullRequestComments:
    comments: Comments  # DynamoDB: who posts, the comment's id, the report version it shows
    hosts: dict[str, GitHubComments | GitLabNotes]  # by repositoryProvider: where the comment is posted, then edited
    quiet_seconds: int
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    # (host, project)s whose token may not comment, until when: looked at again after REFUSED_SECONDS
    _refused: dict[tuple[str, str], float] = field(default_factory=dict, init=False, repr=False)

    def show(self, report: Report, provider: str | None = None) -> None:
        """Post or edit the comment of the pull request (merge request) ``report``'s run belongs to
        (none for a run of a branch, or of a host with no token configured). A token the host
        refuses (401, 403, 404: it may not comment on the repository) is warned about and the project
        left alone for ``REFUSED_SECONDS``; a comment a person deleted is posted anew."""
        provider = provider or "GITHUB"
        host, number = self.hosts.get(provider), pull_request(report.ref)
        if host is None or number is None or self._refused.get((provider, report.project), 0) > self.clock():
            return
        try:
            self._show(report, PullRequestRef(provider, report.project, number), host)
        except HTTPError as exc:
            if not _refused(exc):
                raise
            # that host's token, for this project (another host's may comment), for a while: a token fixed
            # meanwhile comments again, and the operator is told once a while, not at every report
            self._refused[(provider, report.project)] = self.clock() + REFUSED_SECONDS
            log.warning(
                "pull-request comments on %s are off for %s minutes: %s answered %s when the comment was "
                "posted (the token needs %s)",
                report.project,
                REFUSED_SECONDS // 60,
                host.host,
                exc.response.status_code,
                host.needs,
            )

    def _show(self, report: Report, pr: PullRequestRef, host: GitHubComments | GitLabNotes) -> None:
        now = self.clock()
        stored = self.comments.comment(pr)
        if stored is None or "comment_id" not in stored:
            if self.comments.claim(pr, now, now - CLAIM_SECONDS):
                self._post(report, pr, host, now)
                return
            if not report.final:
                return  # another publisher is posting it: a later report edits it
            stored = self._posted(report, pr, host)
            if stored is None:
                log.warning(
                    "the comment on %s #%s was not posted in %ss: the final report of run %s is not in it",
                    pr.project,
                    pr.number,
                    POSTED_WAIT_SECONDS,
                    report.run_id,
                )
                return
        runs = stored.get("runs") or {}
        shown = Shown.of(report, runs, now)
        quiet_since = None if report.final else now - self.quiet_seconds
        if self.comments.take_edit(pr, shown, now, quiet_since):
            body = comment_body(
                report, pr.number, earlier_runs({**runs, shown.run: shown.entry()}, shown, host.thread), host.body_limit
            )
            self._edit(report, pr, host, int(stored["comment_id"]), body)

    def _edit(
        self, report: Report, pr: PullRequestRef, host: GitHubComments | GitLabNotes, comment_id: int, body: str
    ) -> None:
        """Edit the comment; one a person deleted is posted anew, by one publisher (the others edit that
        one later). GitHub answers 404 alike for a deleted comment and for a repository the token cannot
        see: the new post tells which (its refusal turns comments off)."""
        try:
            self._calling(report, lambda: host.edit(pr.project, pr.number, comment_id, body))
        except HTTPError as exc:
            if exc.response is None or exc.response.status_code != 404:
                raise
            now = self.clock()
            if self.comments.take_repost(pr, comment_id, now):
                self._post(report, pr, host, now)

    def _post(self, report: Report, pr: PullRequestRef, host: GitHubComments | GitLabNotes, claimed_at: float) -> None:
        shown = Shown.of(report, {}, claimed_at)
        try:
            body = comment_body(report, pr.number, limit=host.body_limit)
            comment_id = self._calling(report, lambda: host.create(pr.project, pr.number, body))
        except Exception:
            self.comments.release(pr, claimed_at)
            raise
        self.comments.posted(pr, comment_id, shown, self.clock())

    def _calling(self, report: Report, call: Callable[[], T]) -> T:
        """A call to the host: once for a partial report (a later one comes), retried for the final
        one, which is always written, on what is worth another try: a connection that failed, an
        answer ``retryable`` or a rate limit the host documents (``_rate_limited``); never another 4xx."""

        def attempt() -> T | Retry:
            try:
                return call()
            except RequestException as exc:  # HTTPError among them
                answer = exc.response if isinstance(exc, HTTPError) else None
                if answer is not None and not (retryable(answer.status_code) or _rate_limited(answer)):
                    raise
                said = answer.headers.get("retry-after") if answer is not None else None
                return Retry(str(exc), said, error=exc)  # GitHub's secondary limit says when, GitLab's 429 too

        outcome = with_retries(attempt, FINAL_TRIES if report.final else 1, 1.0, 60.0, self.sleep)
        if isinstance(outcome, Retry):
            assert outcome.error is not None
            raise outcome.error
        return outcome

    def _posted(self, report: Report, pr: PullRequestRef, host: GitHubComments | GitLabNotes) -> dict[str, Any] | None:
        """The comment once a concurrent first post recorded its id, or once this final report posted
        it itself because that post was given up (its claim released); None after the wait."""
        waited = 0.0
        while waited < POSTED_WAIT_SECONDS:
            self.sleep(0.5)
            waited += 0.5
            stored = self.comments.comment(pr)
            if stored and "comment_id" in stored:
                return stored
            now = self.clock()
            if self.comments.claim(pr, now, now - CLAIM_SECONDS):
                self._post(report, pr, host, now)  # it shows this report: no edit follows
                return self.comments.comment(pr)
        return None


def _rate_limited(answer: Response) -> bool:
    """A 403 that is GitHub's rate limit, not a refusal: its secondary limit says so in its message or
    with Retry-After, a spent primary limit with x-ratelimit-remaining: 0 (GitLab's is a 429)."""
    return answer.status_code == 403 and (
        "rate limit" in (answer.text or "").lower()
        or "retry-after" in answer.headers
        or answer.headers.get("x-ratelimit-remaining") == "0"
    )


def _refused(exc: HTTPError) -> bool:
    """A token the host will not take for this repository (401, 404, a 403 of permissions), as
    opposed to a rate limit (``_rate_limited``)."""
    answer = exc.response
    return answer is not None and answer.status_code in (401, 403, 404) and not _rate_limited(answer)
