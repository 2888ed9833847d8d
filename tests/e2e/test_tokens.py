"""Per-project tokens over real HTTP: made with `codspeed-aggregator token create`, stored as a
digest, good for their own project only."""

import os
import subprocess
import sys

import pytest
import requests

from codspeed_aggregator.auth import token_digest
from tests.factories import md5_b64, metadata, upload_request


def _token(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "token", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )


@pytest.fixture
def project_token(stack, project):
    made = _token("create", "--project", project)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def _call(stack, token, method, path, **kwargs) -> requests.Response:
    return requests.request(method, f"{stack.api_url}{path}", headers={"Authorization": token}, timeout=10, **kwargs)


@pytest.mark.slow
def test_a_project_token_works_for_its_project_and_is_stored_as_a_digest(stack, project, run_id, project_token):
    from codspeed_aggregator.wiring import for_operator

    answer = _call(
        stack, project_token, "POST", "/v1/uploads", json=upload_request(project, run_id, "1", b"x", total=2)
    )
    assert answer.status_code == 201, answer.text
    assert _call(stack, project_token, "GET", f"/v1/runs/{project}/{run_id}").status_code == 200
    ledger = for_operator().ledger
    assert ledger.tokens.token_project(token_digest(project_token)) == project
    stored = ledger.db.scan(TableName=ledger.table)["Items"]
    assert not any(project_token in str(item) for item in stored)  # the token itself is nowhere


@pytest.mark.parametrize("call", ["upload", "drop-in", "close", "report"])
@pytest.mark.slow
def test_a_project_token_cannot_touch_another_project(stack, project, run_id, project_token, call):
    other = "acme/someone-else"
    meta = metadata(md5_b64(b"x"), owner="acme", repository="someone-else")
    answer = {
        "upload": lambda: _call(
            stack, project_token, "POST", "/v1/uploads", json=upload_request(other, run_id, "1", b"x")
        ),
        "drop-in": lambda: _call(stack, project_token, "POST", "/upload", json=meta),
        "close": lambda: _call(
            stack, project_token, "POST", "/v1/runs/close", json={"project": other, "run_id": run_id}
        ),
        "report": lambda: _call(stack, project_token, "GET", f"/v1/runs/{other}/{run_id}"),
    }[call]()
    assert answer.status_code == 403
    assert answer.json() == {"error": f"this token is for project {project}: it cannot read or change {other}"}
    from tests.conftest import TOKEN

    assert _call(stack, TOKEN, "GET", f"/v1/runs/{other}/{run_id}").status_code == 404  # nothing was made


@pytest.mark.slow
def test_a_revoked_token_is_refused(stack, project, run_id, project_token):
    assert _token("revoke", "--token", project_token).stdout.strip() == "revoked"
    answer = _call(stack, project_token, "GET", f"/v1/runs/{project}/{run_id}")
    assert answer.status_code == 403 and answer.json() == {"error": "the token is not valid for this aggregator"}
    again = _token("revoke", "--token", project_token)
    assert again.returncode == 5 and "no such token" in again.stderr


def test_token_create_refuses_a_bad_project():
    made = _token("create", "--project", "not-a-project")
    assert made.returncode == 2 and "is not owner/repo" in made.stderr
