"""Fixtures: one embedded local stack for the session, and an aggregator on resources nobody polls."""

import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

TOKEN = "local-token"  # the token the files in events/ carry
WEBHOOK_SECRET = "webhook-secret"


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    from codspeed_aggregator.local.stack import LocalStack

    with LocalStack(token=TOKEN, webhook_secret=WEBHOOK_SECRET, upstream_dir=tmp_path_factory.mktemp("upstream"),
                    sweep_every=3600) as running:
        yield running


@dataclass
class Isolated:
    aggregator: object
    resources: object
    upstream: object
    sqs: object

    def finalize_requests(self) -> list[dict]:
        import json

        found = []
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.resources.finalize_queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return found
            for m in messages:
                found.append(json.loads(m["Body"]))
                self.sqs.delete_message(QueueUrl=self.resources.finalize_queue_url, ReceiptHandle=m["ReceiptHandle"])


@pytest.fixture(scope="session")
def isolated(stack, tmp_path_factory) -> Isolated:
    """An Aggregator on its own bucket, table and queues that no poller reads: tests drive every step."""
    from codspeed_aggregator.adapters.aws import client
    from codspeed_aggregator.adapters.bundle_store import BundleStore
    from codspeed_aggregator.adapters.finalize_queue import FinalizeQueue
    from codspeed_aggregator.adapters.ledger_table import DynamoLedger
    from codspeed_aggregator.adapters.upstream_http import UpstreamClient
    from codspeed_aggregator.local.resources import create
    from codspeed_aggregator.local.upstream_stub import StubUpstream
    from codspeed_aggregator.service import Aggregator
    from codspeed_aggregator.settings import Settings

    resources = create(client("s3"), client("sqs"), client("dynamodb"), prefix="isolated")
    upstream = StubUpstream(Path(tmp_path_factory.mktemp("isolated-upstream")), token="upstream-secret").start()
    settings = replace(
        Settings.from_env(), table_name=resources.table, bucket_name=resources.bucket,
        finalize_queue_url=resources.finalize_queue_url, upstream_url=f"{upstream.url}/upload",
        upstream_token="upstream-secret",
    )
    aggregator = Aggregator(
        settings=settings,
        ledger=DynamoLedger(resources.table, client("dynamodb")),
        store=BundleStore(resources.bucket, client("s3")),
        queue=FinalizeQueue(resources.finalize_queue_url, client("sqs")),
        upstream=UpstreamClient(settings.upstream_url, "upstream-secret", timeout=10, attempts=3, sleep=lambda s: None),
    )
    yield Isolated(aggregator, resources, upstream, client("sqs"))
    upstream.stop()


@pytest.fixture
def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def project() -> str:
    """A project of its own, so no other test's run is this test's baseline."""
    return f"acme/widgets-{uuid.uuid4().hex[:8]}"
