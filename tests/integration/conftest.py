"""Fixtures of the integration tests that meet GitHub: its stand-in on loopback, and a fork's pull request."""

import uuid
from dataclasses import replace

import pytest

from codspeed_aggregator.adapters.github_pulls import GitHubPulls
from tests.fake_github import FakeGitHub
from tests.fork_pull_request import BASE, FORK, HEAD, MERGE, NUMBER, Clock


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


@pytest.fixture
def fork(isolated, github, project):
    """The project takes requests without a token; its pull request 8 comes from a fork, and Actions
    run ``run_id`` ran its head."""
    run_id = str(8_000_000_000 + uuid.uuid4().int % 1_000_000_000)
    github.commit_on("main", BASE)
    github.commits[HEAD] = [BASE]
    github.commits[MERGE] = [BASE, HEAD]  # refs/pull/8/merge, which actions/checkout checks out
    github.pulls[NUMBER], github.forks[NUMBER], github.merge_commits[NUMBER] = ("main", HEAD), FORK, MERGE
    github.workflow_runs[run_id] = (HEAD, FORK)  # an Actions run's head_sha is the pull request's head
    base = isolated.aggregator
    agg = replace(
        base,
        settings=replace(base.settings, tokenless_projects=frozenset({project})),
        github_pulls=GitHubPulls(github.url, "gh-token"),
        clock=Clock(),
    )
    return agg, project, run_id
