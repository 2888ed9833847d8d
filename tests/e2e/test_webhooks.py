"""Signed webhooks over real HTTP: refresh a report; GitHub's workflow_run closes the run."""

import json
import time

import pytest
import requests

from codspeed_aggregator.auth import github_webhook_secret, signature
from codspeed_local.profiles import make_profile_folder
from tests.conftest import TOKEN, WEBHOOK_SECRET
from tests.factories import wait_for


def _pushed_run(stack, project, run_id, tmp_path, total=2) -> dict:
    import subprocess
    import sys

    folder = make_profile_folder(tmp_path / "shard", 4242, ["t::hook"])
    env = {"CODSPEED_AGGREGATOR_URL": stack.api_url, "CODSPEED_AGGREGATOR_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "codspeed_client.cli",
            "push",
            "--shard",
            f"1/{total}",
            "--profile-folder",
            str(folder),
            "--project",
            project,
            "--run-id",
            run_id,
            "--commit",
            "e" * 40,
        ],
        env=env,
        check=True,
    )
    return wait_for(lambda: (r := _report(stack, project, run_id)).get("arrived") == 1 and r)


def _report(stack, project, run_id) -> dict:
    return requests.get(
        f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10
    ).json()


def _post(stack, path, body: bytes, secret=WEBHOOK_SECRET, headers=None, sign_body=None) -> requests.Response:
    signed = {} if secret is None else {"X-Hub-Signature-256": signature(secret, sign_body or body)}
    return requests.post(
        f"{stack.api_url}{path}",
        data=body,
        timeout=10,
        headers={"Content-Type": "application/json", **signed, **(headers or {})},
    )


def _refresh_body(project, run_id, timestamp=None) -> bytes:
    return json.dumps({"project": project, "run_id": run_id, "timestamp": int(timestamp or time.time())}).encode()


def test_a_signed_refresh_republishes_the_report_with_a_new_version(stack, project, run_id, tmp_path):
    before = _pushed_run(stack, project, run_id, tmp_path)
    answer = _post(stack, "/webhooks/refresh", _refresh_body(project, run_id))
    assert answer.status_code == 200, answer.text
    assert answer.json()["version"] > before["version"]
    after = _report(stack, project, run_id)
    assert after["version"] == answer.json()["version"] and after["arrived"] == 1


@pytest.mark.parametrize(
    "case, expected",
    [
        ("wrong secret", "does not match the body"),
        ("tampered body", "does not match the body"),
        ("missing header", "missing X-Hub-Signature-256"),
        ("replayed old timestamp", "refused as a replay"),
    ],
)
@pytest.mark.slow
def test_a_bad_signature_gets_401_and_changes_nothing(stack, project, run_id, tmp_path, case, expected):
    before = _pushed_run(stack, project, run_id, tmp_path)
    body = _refresh_body(project, run_id)
    if case == "wrong secret":
        answer = _post(stack, "/webhooks/refresh", body, secret="not-the-secret")
    elif case == "tampered body":
        answer = _post(stack, "/webhooks/refresh", _refresh_body(project, "another-run"), sign_body=body)
    elif case == "missing header":
        answer = _post(stack, "/webhooks/refresh", body, secret=None)
    else:
        answer = _post(stack, "/webhooks/refresh", _refresh_body(project, run_id, time.time() - 600))
    assert answer.status_code == 401 and expected in answer.json()["error"]
    assert _report(stack, project, run_id)["version"] == before["version"]


def test_refresh_of_an_unknown_run_is_404_and_a_bad_body_is_422(stack, project):
    assert _post(stack, "/webhooks/refresh", _refresh_body(project, "no-such-run")).status_code == 404
    bad = _post(stack, "/webhooks/refresh", json.dumps({"project": project, "run_id": "../x", "timestamp": 1}).encode())
    assert bad.status_code == 422 and "run_id" in bad.json()["error"]


def _workflow_run(project, run_id, action="completed") -> bytes:
    return json.dumps(
        {
            "action": action,
            "workflow_run": {"id": int(run_id), "run_attempt": 1, "head_sha": "e" * 40},
            "repository": {"full_name": project},
        }
    ).encode()


@pytest.mark.slow
def test_githubs_workflow_run_completed_closes_the_run(stack, project, tmp_path):
    run_id = str(int(time.time() * 1000))
    _pushed_run(stack, project, run_id, tmp_path)
    github = {"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": "72d3162e"}
    ignored = _post(
        stack,
        "/webhooks/github",
        _workflow_run(project, run_id, "in_progress"),
        headers=github,
        secret=_repo_secret(project),
    )
    assert ignored.status_code == 202 and _report(stack, project, run_id)["state"] == "open"
    for secret in ("forged", WEBHOOK_SECRET, github_webhook_secret(WEBHOOK_SECRET, "acme/another-repo")):
        forged = _post(stack, "/webhooks/github", _workflow_run(project, run_id), secret=secret, headers=github)
        assert forged.status_code == 401 and _report(stack, project, run_id)["state"] == "open"
        assert forged.json()["error"] == (
            f"the X-Hub-Signature-256 signature is not that of {project}'s webhook secret "
            f"(codspeed-aggregator webhook-secret --project {project})"
        )
    answer = _post(
        stack, "/webhooks/github", _workflow_run(project, run_id), headers=github, secret=_repo_secret(project)
    )
    assert answer.status_code == 200 and answer.json() == {"closed": [run_id]}
    final = wait_for(lambda: (r := _report(stack, project, run_id))["state"] == "forwarded" and r)
    assert {s["name"]: s["state"] for s in final["shards"]} == {"1": "arrived", "2": "missing"}
    again = _post(
        stack,
        "/webhooks/github",
        _workflow_run(project, run_id),
        headers=github,
        secret=github_webhook_secret(WEBHOOK_SECRET, project.split("/")[0]),
    )  # an organization's webhook
    assert again.status_code == 200 and again.json() == {"closed": []}


def test_one_repositorys_webhook_secret_cannot_close_another_projects_run(stack, project, tmp_path):
    run_id = str(int(time.time() * 1000) + 1)
    _pushed_run(stack, project, run_id, tmp_path)
    mine = _repo_secret("mallory/own-repo")  # a secret the attacker legitimately has, for their own repository
    answer = _post(
        stack,
        "/webhooks/github",
        _workflow_run(project, run_id),
        secret=mine,
        headers={"X-GitHub-Event": "workflow_run"},
    )
    assert answer.status_code == 401 and _report(stack, project, run_id)["state"] == "open"
    nameless = _post(
        stack, "/webhooks/github", b'{"action": "completed"}', secret=mine, headers={"X-GitHub-Event": "workflow_run"}
    )
    assert nameless.status_code == 401 and "names no repository" in nameless.json()["error"]


def _repo_secret(project: str) -> str:
    return github_webhook_secret(WEBHOOK_SECRET, project)


@pytest.mark.slow
def test_a_workflow_run_delivered_form_encoded_as_githubs_default_closes_the_run(stack, project, tmp_path):
    """GitHub's webhook form offers application/x-www-form-urlencoded first: ``payload=<the JSON>``, signed
    as sent. Every such delivery was a 401 saying the body named no repository; the run waited 3 hours."""
    from urllib.parse import urlencode

    run_id = str(int(time.time() * 1000))
    _pushed_run(stack, project, run_id, tmp_path)
    body = urlencode({"payload": _workflow_run(project, run_id).decode()}).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded", "X-GitHub-Event": "workflow_run"}
    answer = _post(stack, "/webhooks/github", body, headers=form, secret=_repo_secret(project))
    assert (answer.status_code, answer.json()) == (200, {"closed": [run_id]})
    final = wait_for(lambda: (r := _report(stack, project, run_id))["state"] == "forwarded" and r)
    assert {s["name"]: s["state"] for s in final["shards"]} == {"1": "arrived", "2": "missing"}
    signed_payload = _post(  # the signature is the body's as sent, not its payload's
        stack,
        "/webhooks/github",
        body,
        headers=form,
        secret=_repo_secret(project),
        sign_body=_workflow_run(project, run_id),
    )
    assert signed_payload.status_code == 401
    other = _post(
        stack, "/webhooks/github", b"<xml/>", headers={**form, "Content-Type": "text/xml"}, secret=_repo_secret(project)
    )
    assert (other.status_code, other.json()["error"]) == (
        415,
        "the webhook body is not what GitHub sends (Content-Type 'text/xml'): set the webhook's Content type to "
        "application/json or application/x-www-form-urlencoded (GitHub's default, a payload field)",
    )


def test_github_ping_and_other_events(stack):
    body = b'{"zen": "Keep it logically awesome.", "repository": {"full_name": "acme/widgets"}}'
    ping = _post(
        stack, "/webhooks/github", body, secret=_repo_secret("acme/widgets"), headers={"X-GitHub-Event": "ping"}
    )
    assert ping.json() == {"message": "pong"}
    org = b'{"zen": "Design for failure.", "organization": {"login": "acme"}}'
    assert (
        _post(
            stack, "/webhooks/github", org, secret=_repo_secret("acme"), headers={"X-GitHub-Event": "ping"}
        ).status_code
        == 200
    )
    other = _post(
        stack, "/webhooks/github", body, secret=_repo_secret("acme/widgets"), headers={"X-GitHub-Event": "push"}
    )
    assert other.status_code == 202 and other.json() == {"ignored": "event push"}


def test_webhook_secret_prints_a_repositorys_or_an_organizations_secret(monkeypatch, capsys):
    from codspeed_aggregator.cli import main
    from codspeed_aggregator.wiring import reset

    monkeypatch.setenv("WEBHOOK_SECRET", "operator-secret")
    reset()
    try:
        assert main(["webhook-secret", "--project", "acme/widgets"]) == 0
        assert capsys.readouterr().out.strip() == github_webhook_secret("operator-secret", "acme/widgets")
        assert main(["webhook-secret", "--owner", "acme"]) == 0
        assert (
            capsys.readouterr().out.strip()
            == github_webhook_secret("operator-secret", "acme")
            != github_webhook_secret("operator-secret", "acme/widgets")
        )
        monkeypatch.delenv("WEBHOOK_SECRET")
        monkeypatch.delenv("WEBHOOK_SECRET_PARAMETER", raising=False)
        reset()
        assert main(["webhook-secret", "--project", "acme/widgets"]) == 3
        assert "no webhook secret" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        reset()
