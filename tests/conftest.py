"""Fixtures: one embedded local stack for the session, and an aggregator on resources nobody polls."""

import uuid

import pytest

TOKEN = "local-token"  # the token the files in events/ carry
WEBHOOK_SECRET = "webhook-secret"


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    from codspeed_aggregator.local.stack import LocalStack

    with LocalStack(token=TOKEN, webhook_secret=WEBHOOK_SECRET, upstream_dir=tmp_path_factory.mktemp("upstream"),
                    sweep_every=3600) as running:
        yield running


@pytest.fixture(scope="session")
def isolated(stack, tmp_path_factory):
    """An Aggregator on its own bucket, table and queues that no poller reads: tests drive every step."""
    from tests.isolated import build

    built = build(tmp_path_factory.mktemp("isolated-upstream"))
    yield built
    built.upstream.stop()


@pytest.fixture
def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def project() -> str:
    """A project of its own, so no other test's run is this test's baseline."""
    return f"acme/widgets-{uuid.uuid4().hex[:8]}"
