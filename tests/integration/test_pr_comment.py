"""The sticky pull-request comment (optional): posted once per pull request, edited in place as
shards arrive (debounced while partial) and across the pull request's pushes and re-runs, the
newest run's final report always in it; over real HTTP against a GitHub stand-in that checks the
requests as GitHub documents them."""

import threading
import uuid
from dataclasses import replace
from unittest import mock
from urllib.parse import quote

import pytest

from codspeed_aggregator.adapters.github_comments import GitHubComments
from codspeed_aggregator.adapters.gitlab_notes import GitLabNotes
from codspeed_aggregator.domain.pr_comment import PullRequestRef, marker
from codspeed_wire.api import CloseRequest, ShardUploadRequest
from tests.factories import bundle, put, upload_request
from tests.fake_github import FakeGitHub
from tests.fake_gitlab import FakeGitLab

PULL = "refs/pull/42/merge"


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _commenting(isolated, github, clock=None, quiet=30):
    base = isolated.aggregator
    return replace(
        base,
        github_comments=GitHubComments(github.url, "gh-token"),
        settings=replace(base.settings, comment_seconds=quiet),
        **({"clock": clock} if clock else {}),
    )


def _push(agg, project, run_id, shard, total=3, ref=PULL, tokenless=False, **meta) -> str:
    data = bundle(4000 + int(shard))
    request = upload_request(
        project, run_id, shard, data, total=total, ref=ref, event="pull_request", tokenless=tokenless, **meta
    )
    grant = agg.request_upload.grant(ShardUploadRequest.model_validate(request))
    put(grant.model_dump(), data)
    return grant.key


def test_one_comment_is_posted_then_edited_and_the_final_report_lands_within_the_quiet_time(
    isolated, github, project, run_id
):
    clock = Clock()
    agg = _commenting(isolated, github, clock)
    keys = [_push(agg, project, run_id, str(i)) for i in (1, 2, 3)]
    agg.record_arrival.record(keys[0])
    [(comment_id, comment)] = github.comments.items()
    assert (comment["project"], comment["number"], comment["edits"]) == (project, 42, 0)
    assert comment["body"].startswith(marker(project, 42) + "\n")
    assert "1/3 shards in" in comment["body"]
    clock.now += 5
    agg.record_arrival.record(keys[1])  # within the quiet time: not edited
    assert comment["edits"] == 0 and "1/3 shards in" in comment["body"]
    clock.now += 30
    agg.record_arrival.record(keys[2])  # past it: edited (3/3 in)
    assert comment["edits"] == 1 and "3/3 shards in" in comment["body"]
    clock.now += 1
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # final: edited at once, quiet time or not
    assert len(github.comments) == 1 and "forwarded, 3/3 shards in" in github.comments[comment_id]["body"]
    assert [m for m, _ in github.requests].count("POST") == 1


def test_publishers_racing_on_a_new_comment_post_it_once(isolated, github, project, run_id, monkeypatch):
    agg = _commenting(isolated, github)
    db, lock = agg.ledger.db, threading.Lock()
    call = db._make_api_call

    def one_at_a_time(*args):  # moto's DynamoDB is not thread-safe: each call alone, as DynamoDB's are atomic
        with lock:
            return call(*args)

    monkeypatch.setattr(db, "_make_api_call", one_at_a_time)
    key = _push(agg, project, run_id, "1")
    agg.record_arrival.record(key)
    github.comments.clear()
    github.requests.clear()
    agg.ledger.db.delete_item(
        TableName=agg.ledger.table,
        Key={"pk": {"S": f"RUN#{project}#~pull-requests"}, "sk": {"S": "~COMMENT#GITHUB#42"}},
    )
    report = agg.reports.report(project, run_id)
    start = threading.Barrier(6)

    def publish():
        start.wait()
        agg.reports.comments.show(report)

    threads = [threading.Thread(target=publish) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [m for m, _ in github.requests] == ["POST"] and len(github.comments) == 1


def test_a_branch_run_posts_no_comment(isolated, github, project, run_id):
    agg = _commenting(isolated, github)
    agg.record_arrival.record(_push(agg, project, run_id, "1", total=1, ref="refs/heads/main"))
    assert github.requests == [] and github.comments == {}


@pytest.mark.parametrize("which", ["first", "second"])
@pytest.mark.slow
def test_a_run_an_upload_of_which_came_without_a_token_posts_no_comment(isolated, github, project, run_id, which):
    """Anyone can send a tokenless upload (a fork's pull request has no secrets), naming any pull
    request: the stack's token never speaks for it. A tokenless upload joining a run marks it too."""
    agg = _commenting(isolated, github, quiet=0)
    first = _push(agg, project, run_id, "1", total=2, tokenless=which == "first")
    second = _push(agg, project, run_id, "2", total=2, tokenless=which == "second")
    assert agg.ledger.runs.run_record(project, run_id).tokenless
    assert [agg.record_arrival.record(k) for k in (first, second)] == ["recorded", "recorded"]
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert github.requests == [] and github.comments == {}
    assert agg.reports.report(project, run_id).state == "forwarded"  # reported as any other run


def test_a_tokenless_run_of_a_branch_never_becomes_its_baseline(isolated, project, run_id):
    """The API refuses a tokenless upload for a branch's ref (tests/e2e/test_runner_drop_in.py); a
    run marked tokenless is no baseline even so."""
    agg = isolated.aggregator
    assert (
        agg.record_arrival.record(_push(agg, project, run_id, "1", total=1, ref="refs/heads/main", tokenless=True))
        == "recorded"
    )
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") is None
    trusted = f"{run_id}-b"
    assert agg.record_arrival.record(_push(agg, project, trusted, "1", total=1, ref="refs/heads/main")) == "recorded"
    assert agg.finalize_run.finalize(project, trusted) == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") == trusted


def test_a_token_github_refuses_is_warned_about_once_and_nothing_fails(isolated, github, project, run_id, caplog):
    github.fail_with = 403
    agg = _commenting(isolated, github, quiet=0)
    assert agg.record_arrival.record(_push(agg, project, run_id, "1", total=2)) == "recorded"
    assert agg.record_arrival.record(_push(agg, project, run_id, "2", total=2)) == "recorded"
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert github.requests == [("POST", f"/repos/{project}/issues/42/comments")]  # then left alone
    warned = [r.getMessage() for r in caplog.records if "pull-request comments" in r.getMessage()]
    assert warned == [
        f"pull-request comments on {project} are off for 10 minutes: GitHub answered 403 when the comment was "
        "posted (the token needs pull requests: write)"
    ]


def test_a_gitlab_merge_requests_run_asks_github_nothing(isolated, github, project, run_id):
    """CodSpeed's runner names a GitLab merge request refs/pull/IID/merge too: GitHub is no place to comment on it."""
    from codspeed_aggregator.adapters.github_commits import GitHubCommits
    from codspeed_aggregator.adapters.github_status import GitHubStatuses

    agg = replace(
        _commenting(isolated, github),
        statuses=GitHubStatuses(github.url, "gh-token"),
        github_commits=GitHubCommits(github.url, "gh-token"),
    )
    for shard in ("1", "2"):
        agg.record_arrival.record(_push(agg, project, run_id, shard, total=2, repositoryProvider="GITLAB"))
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    assert agg.reports.report(project, run_id).ref == PULL
    assert (github.comments, github.statuses, github.reads, github.requests) == ({}, [], [], [])


@pytest.fixture
def gitlab():
    fake = FakeGitLab()
    yield fake
    fake.stop()


def test_a_gitlab_merge_request_gets_one_note_edited_to_the_final_report_and_github_is_asked_nothing(
    isolated, github, gitlab, run_id
):
    project = f"platform/perf/engine-{uuid.uuid4().hex[:6]}"  # a subgroup's: its path URL-encoded whole
    agg = replace(_commenting(isolated, github, quiet=0), gitlab_notes=GitLabNotes(gitlab.api_url, "gl-token"))
    first, second = (_push(agg, project, run_id, shard, total=2, repositoryProvider="GITLAB") for shard in ("1", "2"))
    agg.record_arrival.record(first)
    [(note_id, note)] = gitlab.notes.items()
    assert (note["project"], note["merge_request"], note["edits"]) == (quote(project, safe=""), 42, 0)
    assert note["body"].startswith(marker(project, 42) + "\n") and "1/2 shards in" in note["body"]
    agg.record_arrival.record(second)
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    assert len(gitlab.notes) == 1 and "forwarded, 2/2 shards in" in gitlab.notes[note_id]["body"]
    notes = f"/api/v4/projects/{quote(project, safe='')}/merge_requests/42/notes"
    # posted once; edited at each report after it (quiet time 0): the second arrival, finalizing, forwarded
    assert gitlab.requests == [("POST", notes)] + [("PUT", f"{notes}/{note_id}")] * 3 and note["edits"] == 3
    assert (github.requests, github.comments) == ([], {})


def test_a_token_gitlab_refuses_is_warned_about_once_and_nothing_fails(isolated, gitlab, project, run_id, caplog):
    gitlab.fail_with = 403
    agg = replace(isolated.aggregator, gitlab_notes=GitLabNotes(gitlab.api_url, "gl-token"))
    for shard in ("1", "2"):
        assert (
            agg.record_arrival.record(_push(agg, project, run_id, shard, total=2, repositoryProvider="GITLAB"))
            == "recorded"
        )
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"
    assert gitlab.requests == [("POST", f"/api/v4/projects/{quote(project, safe='')}/merge_requests/42/notes")]
    warned = [r.getMessage() for r in caplog.records if "pull-request comments" in r.getMessage()]
    assert warned == [
        f"pull-request comments on {project} are off for 10 minutes: GitLab answered 403 when the comment was "
        "posted (the token needs the api "
        "scope, as a member who may comment on merge requests)"
    ]


SECONDARY_LIMIT = (
    403,
    {
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        "documentation_url": "https://docs.github.com/rest",
    },
    {"retry-after": "60"},
)


@pytest.mark.parametrize(
    "failure", [(502, {"message": "Server Error"}, {}), SECONDARY_LIMIT], ids=["502", "secondary rate limit"]
)
@pytest.mark.slow
def test_a_first_post_that_fails_releases_its_claim_and_the_final_report_posts_the_one_comment(
    isolated, github, project, run_id, failure
):
    """A 502 left the claim held for its 60 s and the final report gave up after 10 s; a 403 of
    GitHub's secondary rate limit turned the project's comments off."""
    clock = Clock()
    agg = _commenting(isolated, github, clock)
    keys = [_push(agg, project, run_id, str(i)) for i in (1, 2, 3)]
    github.fail_next.append(failure)
    agg.record_arrival.record(keys[0])  # its comment's POST fails: logged, the arrival counted all the same
    assert github.comments == {} and [m for m, _ in github.requests] == ["POST"]
    stored = agg.ledger.comments.comment(PullRequestRef("GITHUB", project, 42))
    assert stored["claimed_at"] == 0 and "comment_id" not in stored  # given up, not held
    clock.now += 5  # well within the claim's 60 s
    for key in keys[1:]:
        agg.record_arrival.record(key)
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    [comment] = github.comments.values()
    assert "forwarded, 3/3 shards in" in comment["body"]
    assert [m for m, _ in github.requests].count("POST") == 2  # the failed one and the one that landed


@pytest.mark.slow
def test_the_final_reports_edit_is_retried_until_it_lands(isolated, github, project, run_id):
    clock = Clock()
    agg = _commenting(isolated, github, clock)
    keys = [_push(agg, project, run_id, str(i), total=2) for i in (1, 2)]
    agg.record_arrival.record(keys[0])
    agg.record_arrival.record(keys[1])
    github.fail_next += [(502, {"message": "Server Error"}, {}), (503, {"message": "Unavailable"}, {})]
    clock.now += 1
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    [comment] = github.comments.values()
    assert "forwarded, 2/2 shards in" in comment["body"]
    assert [m for m, _ in github.requests][-3:] == ["PATCH", "PATCH", "PATCH"]  # two failures, then the edit


def test_a_pull_requests_pushes_and_re_runs_share_one_comment_that_shows_the_newest_run(isolated, github, project):
    """Each push to a pull request starts a workflow run: each got a comment of its own. Now one
    comment shows the newest run; the older run's report that finishes later (its re-run
    included) never overwrites it, and the older runs are one folded line with their links."""
    clock = Clock()
    agg = _commenting(isolated, github, clock, quiet=0)
    first, second = f"pr-{uuid.uuid4().hex[:8]}", f"pr-{uuid.uuid4().hex[:8]}"
    agg.record_arrival.record(_push(agg, project, first, "1", total=2, commit="1" * 40))
    clock.now += 60
    agg.record_arrival.record(_push(agg, project, second, "1", total=2, commit="2" * 40))  # the next push: a newer run
    [(comment_id, comment)] = github.comments.items()
    assert "2222222" in comment["body"] and "1 earlier run of this pull request" in comment["body"]
    assert f"run {first} (commit `111111111111`)" in comment["body"]
    edits = comment["edits"]

    clock.now += 60
    # the older run completes later
    agg.record_arrival.record(_push(agg, project, first, "2", total=2, commit="1" * 40))
    assert agg.finalize_run.finalize(project, first) == "forwarded"
    agg.record_arrival.record(_push(agg, project, first, "2", total=2, commit="1" * 40))  # and is re-run: its attempt 2
    assert agg.finalize_run.finalize(project, f"{first}~2") == "forwarded"
    assert comment["edits"] == edits and "2222222" in comment["body"]  # never over the newer run

    agg.record_arrival.record(_push(agg, project, second, "2", total=2, commit="2" * 40))
    assert agg.finalize_run.finalize(project, second) == "forwarded"
    assert len(github.comments) == 1 and [m for m, _ in github.requests].count("POST") == 1
    assert "forwarded, 2/2 shards in" in github.comments[comment_id]["body"] and comment["edits"] > edits


def test_a_merge_requests_pipelines_share_one_note(isolated, github, gitlab):
    """A merge request's pipelines (one per push) each got a note of their own."""
    project = f"platform/perf/engine-{uuid.uuid4().hex[:6]}"
    clock = Clock()
    agg = replace(_commenting(isolated, github, clock, quiet=0), gitlab_notes=GitLabNotes(gitlab.api_url, "gl-token"))
    for commit in ("3" * 40, "4" * 40):
        run = f"gl-{commit[:12]}"
        agg.record_arrival.record(_push(agg, project, run, "1", total=1, commit=commit, repositoryProvider="GITLAB"))
        assert isolated.finalize_all(project, run, agg) == "forwarded"
        clock.now += 60
    [note] = gitlab.notes.values()
    assert "4444444" in note["body"] and "1 earlier run of this merge request" in note["body"]
    assert [m for m, _ in gitlab.requests].count("POST") == 1


def test_a_github_and_a_gitlab_project_of_one_path_each_keep_their_own_comment(isolated, github, gitlab, caplog):
    """One comment item for both hosts: the GitLab run edited GitLab note <GitHub's comment id>, got
    404, and turned comments off for the project on both hosts."""
    project, clock = f"acme/both-{uuid.uuid4().hex[:6]}", Clock()
    agg = replace(_commenting(isolated, github, clock, quiet=0), gitlab_notes=GitLabNotes(gitlab.api_url, "gl-token"))
    hub, lab = f"gh-{uuid.uuid4().hex[:8]}", f"gl-{uuid.uuid4().hex[:8]}"
    agg.record_arrival.record(_push(agg, project, hub, "1", total=2))
    agg.record_arrival.record(_push(agg, project, lab, "1", total=2, repositoryProvider="GITLAB"))
    [comment], [note] = github.comments.values(), gitlab.notes.values()
    for run, provider in ((hub, None), (lab, {"repositoryProvider": "GITLAB"})):
        clock.now += 60
        agg.record_arrival.record(_push(agg, project, run, "2", total=2, **(provider or {})))
    assert "2/2 shards in" in comment["body"] and "2/2 shards in" in note["body"]
    assert [m for m, _ in github.requests].count("POST") == 1 and [m for m, _ in gitlab.requests].count("POST") == 1
    assert not [r for r in caplog.records if "pull-request comments" in r.getMessage()]


def test_a_token_one_host_refuses_leaves_the_other_hosts_comments_on(isolated, github, gitlab, caplog):
    project = f"acme/both-{uuid.uuid4().hex[:6]}"
    gitlab.fail_with = 403
    agg = replace(_commenting(isolated, github, quiet=0), gitlab_notes=GitLabNotes(gitlab.api_url, "gl-token"))
    agg.record_arrival.record(
        _push(agg, project, f"gl-{uuid.uuid4().hex[:8]}", "1", total=1, repositoryProvider="GITLAB")
    )
    agg.record_arrival.record(_push(agg, project, f"gh-{uuid.uuid4().hex[:8]}", "1", total=2))
    assert len(github.comments) == 1  # GitLab's refusal said nothing of GitHub's token
    warned = [r.getMessage() for r in caplog.records if "pull-request comments" in r.getMessage()]
    assert len(warned) == 1 and "GitLab answered 403" in warned[0]


def test_every_edit_moves_the_comments_expiry_so_it_lives_as_long_as_its_pull_request(
    isolated, github, project, run_id
):
    """The expiry was set once, at the claim: a pull request older than BundleRetentionDays lost its
    item to TTL, and its next run posted a second comment."""
    clock = Clock()
    agg = _commenting(isolated, github, clock, quiet=0)
    comments, pr = agg.ledger.comments, PullRequestRef("GITHUB", project, 42)
    agg.record_arrival.record(_push(agg, project, run_id, "1", total=2))
    # as if written retention days ago
    comments.db.update_item(
        TableName=comments.table,
        Key=comments._key(pr),
        UpdateExpression="SET expires_at = :soon",
        ExpressionAttributeValues={":soon": {"N": "1"}},
    )
    clock.now += 60
    agg.record_arrival.record(_push(agg, project, run_id, "2", total=2))
    assert comments.comment(pr)["expires_at"] >= comments.expires_at() - 60


def test_the_final_reports_edit_waits_what_github_says_before_it_tries_again(isolated, github, project, run_id):
    """Three HTTP retry loops had three policies: the comments doubled their own wait (1, 2, 4 s)
    whatever GitHub's secondary rate limit said in Retry-After."""
    clock = Clock()
    agg = _commenting(isolated, github, clock)
    keys = [_push(agg, project, run_id, str(i), total=2) for i in (1, 2)]
    agg.record_arrival.record(keys[0])
    agg.record_arrival.record(keys[1])
    limited = dict(SECONDARY_LIMIT[1])
    github.fail_next.append((403, limited, {"retry-after": "7"}))
    waited = []
    with mock.patch.object(agg.reports.comments, "sleep", waited.append):
        clock.now += 1
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert waited == [7.0]  # as GitHub said, not the backoff's second
    [comment] = github.comments.values()
    assert "forwarded, 2/2 shards in" in comment["body"]


def test_a_comment_a_person_deleted_is_posted_anew_and_every_pull_request_keeps_its_comment(
    isolated, github, project, run_id
):
    """GitHub answers 404 both for a deleted comment and for a repository the token cannot see: the edit's
    404 turned comments off for the whole project while the process lived (PR 5, 6 and 7 got none)."""
    agg = _commenting(isolated, github, quiet=0)
    agg.record_arrival.record(_push(agg, project, run_id, "1", total=2))
    (first,) = github.comments
    del github.comments[first]  # a person deletes the bot's comment
    agg.record_arrival.record(_push(agg, project, run_id, "2", total=2))  # the next report edits it: 404
    (again,) = github.comments
    assert again != first and github.comments[again]["edits"] == 0 and "2 of 2" in github.comments[again]["body"]
    other = f"{run_id}-6"
    agg.record_arrival.record(_push(agg, project, other, "1", total=1, ref="refs/pull/6/merge"))
    assert len(github.comments) == 2  # another pull request of the project still gets its comment
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert github.comments[again]["edits"] >= 1  # edited in place from then on: one comment per pull request


def test_a_refused_token_turns_comments_off_for_a_while_then_they_are_tried_again(isolated, github, project, run_id):
    clock = Clock()
    agg = _commenting(isolated, github, clock=clock, quiet=0)
    github.fail_with = 403
    agg.record_arrival.record(_push(agg, project, run_id, "1", total=3))
    agg.record_arrival.record(_push(agg, project, run_id, "2", total=3))
    assert github.requests == [("POST", f"/repos/{project}/issues/42/comments")]  # once, then left alone
    github.fail_with = None  # the operator gave the token pull requests: write
    clock.now += 601
    agg.record_arrival.record(_push(agg, project, run_id, "3", total=3))
    assert len(github.comments) == 1


def test_the_final_reports_edit_is_not_retried_on_an_answer_no_retry_can_change(isolated, github, project, run_id):
    """Every answer but a refusal of the token was retried three times, GitHub's 422 among them: only
    a connection that failed, a 5xx, 408, 429 or GitHub's rate-limit 403 is worth another try."""
    clock = Clock()
    agg = _commenting(isolated, github, clock)
    keys = [_push(agg, project, run_id, str(i), total=2) for i in (1, 2)]
    agg.record_arrival.record(keys[0])
    agg.record_arrival.record(keys[1])
    rate_limited = (403, {"message": "You have exceeded a secondary rate limit"}, {"Retry-After": "0"})
    github.fail_next += [rate_limited, (422, {"message": "Validation Failed"}, {})]
    before = len(github.requests)
    clock.now += 1
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # a comment never fails a forward
    assert [m for m, _ in github.requests[before:]] == ["PATCH", "PATCH"]  # the limit waited out, the 422 once
