"""The whole aggregator on this machine: moto's server, a gateway, pollers, a stand-in upstream."""

import os
import secrets
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters import aws

from .iam import RoleEnforcer
from .iam.roles import local_policies
from .moto_server import start_moto, woken_by
from .pollers import QueuePoller
from .resources import create
from .serving import stop_serving
from .upstream_stub import StubUpstream

UPSTREAM_TOKENS_PATH = "/codspeed-aggregator/upstream-tokens"  # the template's default: its grant covers it


class LocalStack:
    def __init__(  # noqa: PLR0913 -- each option of `codspeed-aggregator local`, a keyword
        self,
        *,
        port: int = 0,
        token: str | None = None,
        upstream_url: str | None = None,
        upstream_dir: str | Path | None = None,
        upstream_token: str | None = None,
        deadline_seconds: int | None = None,
        webhook_secret: str | None = None,
        sweep_every: float = 5.0,
        pollers: bool = True,
        env: dict[str, str] | None = None,
        log: Callable[[str], None] | None = None,
        roles: bool = True,
        event_delay: float = 0.0,
    ) -> None:
        self.port = port
        self.token = token or f"local-{secrets.token_urlsafe(12)}"
        self.upstream_token = upstream_token or f"upstream-{secrets.token_urlsafe(8)}"
        self.upstream_url = upstream_url
        self.upstream_dir = Path(upstream_dir) if upstream_dir else Path(tempfile.mkdtemp(prefix="codspeed-upstream-"))
        self._own_upstream_dir = upstream_dir is None  # removed when the stack stops
        self.log = log  # one line per API request
        self.deadline_seconds = deadline_seconds
        # also what signs run pages' links: a stack always has one
        self.webhook_secret = webhook_secret or f"local-{secrets.token_urlsafe(16)}"
        self.sweep_every = sweep_every
        self.run_pollers = pollers  # off: bundles land and wait in the queue (benchmarks of the upload path)
        self.extra_env = env or {}
        # each S3 event held this long before the arrivals function takes it: AWS's timing (seconds after the
        # PUT), where moto delivers at once
        self.event_delay = event_delay
        # Each function's calls held against its role in template.yaml (local.iam), as in AWS.
        self.enforcer = RoleEnforcer({}) if roles else None
        self._unhook = None
        self.upstream: StubUpstream | None = None
        self._servers, self._pollers = [], []
        self._stop = threading.Event()

    @property
    def api_url(self) -> str:
        host, port = self._gateway.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "LocalStack":
        # the local stack disables metrics, so powertools would warn at every batch that it published none
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        if self.enforcer is not None:
            self._unhook = aws.on_session(self.enforcer.attach)
        moto = start_moto(refused=self.enforcer.presign_refusal if self.enforcer else None)
        self._servers.append(moto)
        endpoint = f"http://127.0.0.1:{moto.server_address[1]}"
        if self.upstream_url is None:
            self.upstream = StubUpstream(self.upstream_dir, self.upstream_token).start()
            # the stand-in takes a job's OIDC token as CodSpeed does, by the keys of the issuer the stack trusts
            self.upstream.oidc_repository = lambda token: wiring.oidc().repository(token)
            self._servers.append(self.upstream.server)
            upstream_url = f"{self.upstream.url}/upload"
        else:
            upstream_url = self.upstream_url
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "local",
                "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_DEFAULT_REGION": "us-east-1",
                "POWERTOOLS_SERVICE_NAME": "codspeed-aggregator",
                "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
                "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED", "true"),
                "POWERTOOLS_METRICS_NAMESPACE": "CodSpeedAggregatorLocal",
            }
        )
        wiring.reset()
        client = aws.client
        self.resources = create(client("s3"), client("sqs"), client("dynamodb"))
        if self.enforcer is not None:
            self.enforcer.policies = local_policies(self.resources)
        os.environ.update(
            {
                "TABLE_NAME": self.resources.table,
                "BUCKET_NAME": self.resources.bucket,
                "FINALIZE_QUEUE_URL": self.resources.finalize_queue_url,
                "UPSTREAM_URL": upstream_url,
                "ARRIVALS_QUEUE_URL": self.resources.arrivals_queue_url,
                "ARRIVALS_DEAD_LETTER_QUEUE_URL": self.resources.arrivals_dlq_url,
                "API_TOKEN": self.token,
                "UPSTREAM_TOKEN": self.upstream_token,
                "UPSTREAM_TOKENS_PATH": UPSTREAM_TOKENS_PATH,
                **({"RUN_DEADLINE_SECONDS": str(self.deadline_seconds)} if self.deadline_seconds else {}),
                "WEBHOOK_SECRET": self.webhook_secret,
                **self.extra_env,
            }
        )
        wiring.reset()
        from codspeed_aggregator.handlers import api, arrivals, finalizer

        from .gateway import start_gateway

        self._gateway = start_gateway(api.handler, port=self.port, log=self.log)
        self._servers.append(self._gateway)
        os.environ["PUBLIC_URL"] = self.api_url  # run pages' links, in reports made off a request
        wiring.reset()
        sqs = client("sqs")
        self.arrivals = QueuePoller(
            sqs,
            self.resources.arrivals_queue_url,
            arrivals.handler,
            "codspeed-arrivals",
            wake=woken_by(self.resources.arrivals_queue_url),
        )
        self.arrivals.min_age = self.event_delay
        self.finalizer = QueuePoller(
            sqs,
            self.resources.finalize_queue_url,
            finalizer.handler,
            "codspeed-finalizer",
            wake=woken_by(self.resources.finalize_queue_url),
        )
        if self.run_pollers:
            self._pollers += [self.arrivals.start(), self.finalizer.start()]
            threading.Thread(target=self._sweep, name="sweeper", daemon=True).start()
        return self

    def _sweep(self) -> None:
        from codspeed_aggregator.handlers import sweeper

        from .lambda_context import LocalContext

        while not self._stop.wait(self.sweep_every):
            try:
                sweeper.handler(
                    {"source": "aws.events", "detail-type": "Scheduled Event"}, LocalContext("codspeed-sweeper")
                )
            except Exception:
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._unhook is not None:
            self._unhook()
        for poller in self._pollers:  # each told first, then waited for together: a stop waits 10 s at most
            poller.stop(wait=0)
        until = time.monotonic() + 10
        for poller in self._pollers:
            poller.stop(wait=max(0.01, until - time.monotonic()))
        for server in self._servers:
            stop_serving(server)
        if self._own_upstream_dir:
            shutil.rmtree(self.upstream_dir, ignore_errors=True)

    def __enter__(self) -> "LocalStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
