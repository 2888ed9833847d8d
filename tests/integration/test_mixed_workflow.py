"""A pull request's workflow that mixes a job running CodSpeed's runner (pointed at the aggregator)
and a job pushing with codspeed-client: both say what the runner says of their job (the checkout's
HEAD, GitHub's merge commit), so they are one run, in either order; a real disagreement is still
refused, naming both values. The client's request is built by the client itself, from GitHub's
pull_request environment and payload, in a checkout of refs/pull/N/merge."""

import json

import pytest

from codspeed_aggregator.domain.errors import Conflict
from codspeed_aggregator.domain.records import SentPost
from codspeed_client import metadata as client_metadata
from codspeed_client.ci_providers import detect
from codspeed_rules.runner_json import compact
from codspeed_wire.api import ShardUploadRequest
from codspeed_wire.upstream import UploadMetadata
from tests import runner
from tests.factories import bundle, md5_b64, pull_request_checkout


@pytest.fixture
def job(tmp_path, monkeypatch, project, run_id):
    """A pull_request job of ``project``'s workflow run ``run_id``: its checkout (GitHub's merge commit of
    the head into main, detached) and its environment."""
    repo = tmp_path / "checkout"
    commits = pull_request_checkout(repo)
    base, head, merge = commits["base"], commits["head"], commits["merge"]
    same = {"id": 1, "full_name": project, "owner": {"login": project.split("/")[0]}}
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "repository": {**same, "private": False},
                "pull_request": {
                    "number": 7,
                    "head": {"ref": "feature", "sha": head, "repo": same},
                    "base": {"ref": "main", "sha": base, "repo": same},
                },
            }
        )
    )
    monkeypatch.chdir(repo)
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": project,
        "GITHUB_RUN_ID": run_id,
        "GITHUB_JOB": "push-shards",
        "GITHUB_ACTOR": "octocat",
        "GITHUB_ACTOR_ID": "583231",
        "GITHUB_REF": "refs/pull/7/merge",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": merge,
        "GITHUB_WORKSPACE": str(repo),
    }
    return env, {"head": head, "merge": merge}


def _pushed(env: dict, project: str, run_id: str) -> ShardUploadRequest:
    """What ``codspeed-client push --shard 1/2`` asks in that job, as the client builds it."""
    data = bundle(4242)
    ctx = detect(env)
    meta = client_metadata.build(
        ctx, project=project, run_id=run_id, commit=ctx.commit or "", shard="1", md5=md5_b64(data)
    )
    return ShardUploadRequest.model_validate(
        {
            "project": project,
            "run_id": run_id,
            "shard": "1",
            "total": 2,
            "size": len(data),
            "md5": md5_b64(data),
            "metadata": meta,
            "metadata_body": compact(meta).decode(),
            "head_commit": ctx.head_commit,
        }
    )


def _runner_job(project: str, run_id: str, commit: str) -> tuple[UploadMetadata, SentPost]:
    """CodSpeed's runner in another job of the same workflow run: its POST as it sends it."""
    sent = runner.github_job(
        project,
        run_id,
        runner.recorded(1),
        commit,
        ref="refs/pull/7/merge",
        head_ref="feature",
        base_ref="main",
        event="pull_request",
    )
    body = runner.body_of(sent)
    return UploadMetadata.model_validate(json.loads(body)), SentPost(body, "codspeed-runner")


@pytest.mark.parametrize("runner_first", [True, False], ids=["runner-then-push", "push-then-runner"])
def test_a_runner_job_and_a_client_push_of_one_workflow_run_are_one_run_in_either_order(
    isolated, job, project, run_id, runner_first
):
    env, commits = job
    agg = isolated.aggregator
    pushed = _pushed(env, project, run_id)
    assert pushed.metadata.commit_hash == commits["merge"]  # the runner's commit, not the head
    steps = [
        lambda: agg.runner_upload.accept(*_runner_job(project, run_id, commits["merge"])),
        lambda: agg.request_upload.grant(pushed),
    ]
    for step in steps if runner_first else steps[::-1]:
        step()  # each taken: before, the second was refused (409, commitHash head against merge commit)
    run = agg.ledger.runs.run_record(project, run_id)
    assert (run.commit, run.ref) == (commits["merge"], "refs/pull/7/merge")
    assert set(run.groups) == {"", "bench"}  # the pushed shards' group and the runner's job


def test_a_runner_job_of_another_commit_is_still_refused_naming_both(isolated, job, project, run_id):
    env, commits = job
    agg = isolated.aggregator
    agg.request_upload.grant(_pushed(env, project, run_id))
    with pytest.raises(Conflict) as refused:
        agg.runner_upload.accept(*_runner_job(project, run_id, commits["head"]))
    assert str(refused.value) == (
        f"metadata field commitHash is {commits['head']!r} in this shard but {commits['merge']!r} in the run: "
        "every shard of a run must agree on it"
    )
