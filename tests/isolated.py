"""An Aggregator on its own bucket, table and queues that no poller reads, so that every
step is driven by hand. Needs a running local stack (for moto's server)."""

import json
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass
class Isolated:
    aggregator: object
    resources: object
    upstream: object
    sqs: object

    def finalize_requests(self) -> list[dict]:
        """Take every finalize message off the queue."""
        return [json.loads(body) for body in self.take(self.resources.finalize_queue_url)]

    def take(self, queue_url: str) -> list[str]:
        """Take every message off a queue: the bodies."""
        found = []
        while messages := self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
            for m in messages:
                found.append(m["Body"])
                self.sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return found

    def finalize_all(self, project: str, run_id: str, aggregator=None) -> str:
        """Finalize a run as the finalizer's queue would: the run, then each part it queued."""
        aggregator = aggregator or self.aggregator
        state = aggregator.finalize_run.finalize(project, run_id)
        for message in self.finalize_requests():
            if message.get("part") is not None and message["run_id"] == run_id:
                state = aggregator.finalize_run.finalize(project, run_id, message["part"])
        return state


def build(upstream_folder: Path, prefix: str = "isolated", enforcer=None) -> Isolated:
    """``enforcer``: the local stack's, which then holds this stack's calls to the template's roles too."""
    from codspeed_aggregator.adapters.aws import client
    from codspeed_aggregator.adapters.bucket import Bucket
    from codspeed_aggregator.adapters.ledger import Ledger
    from codspeed_aggregator.adapters.queues import FinalizeQueue, Queue
    from codspeed_aggregator.adapters.results_store import ResultsStore
    from codspeed_aggregator.adapters.upstream_http import UpstreamClient
    from codspeed_aggregator.settings import Settings
    from codspeed_aggregator.use_cases.aggregator import Aggregator
    from codspeed_local.resources import create
    from codspeed_local.upstream_stub import StubUpstream

    resources = create(client("s3"), client("sqs"), client("dynamodb"), prefix=prefix)
    if enforcer is not None:
        from codspeed_local.iam.roles import local_policies

        enforcer.add(local_policies(resources))
    upstream = StubUpstream(upstream_folder, token="upstream-secret").start()
    settings = replace(
        Settings.from_env(),
        table_name=resources.table,
        bucket_name=resources.bucket,
        finalize_queue_url=resources.finalize_queue_url,
        arrivals_queue_url=resources.arrivals_queue_url,
        arrivals_dead_letter_url=resources.arrivals_dlq_url,
        upstream_url=f"{upstream.url}/upload",
        upstream_token="upstream-secret",
    )
    aggregator = Aggregator(
        settings=settings,
        ledger=Ledger.on(resources.table, client("dynamodb")),
        store=Bucket(resources.bucket, client("s3")),
        results=ResultsStore(resources.bucket, client("s3")),
        queue=FinalizeQueue(resources.finalize_queue_url, client("sqs")),
        arrivals_queue=Queue(resources.arrivals_queue_url, client("sqs"), resources.arrivals_dlq_url),
        upstream=UpstreamClient(settings.upstream_url, "upstream-secret", timeout=10, attempts=3, sleep=lambda s: None),
    )
    return Isolated(aggregator, resources, upstream, client("sqs"))


def on_stack():
    """The running local stack's use cases on the operator's clients: a test's own set-up and reads
    are held to no role, and each use case it drives to the role of the function that runs it."""
    from codspeed_aggregator.adapters.aws import OPERATOR, client
    from codspeed_aggregator.adapters.bucket import Bucket
    from codspeed_aggregator.adapters.ledger import Ledger
    from codspeed_aggregator.adapters.queues import FinalizeQueue, Queue
    from codspeed_aggregator.adapters.results_store import ResultsStore
    from codspeed_aggregator.adapters.upstream_http import UpstreamClient
    from codspeed_aggregator.auth import page_key
    from codspeed_aggregator.use_cases.aggregator import Aggregator
    from codspeed_aggregator.wiring import settings, webhook_secret

    config, master = settings(), webhook_secret(OPERATOR)
    return Aggregator(
        settings=config,
        ledger=Ledger.on(config.table_name, client("dynamodb")),
        page_key=page_key(master) if master else None,
        store=Bucket(config.bucket_name, client("s3")),
        results=ResultsStore(config.bucket_name, client("s3")),
        queue=FinalizeQueue(config.finalize_queue_url, client("sqs")),
        arrivals_queue=Queue(config.arrivals_queue_url, client("sqs")),
        upstream=UpstreamClient(config.upstream_url, config.upstream_token, timeout=10, attempts=3),
    )
