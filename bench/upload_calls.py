"""The AWS calls one CodSpeed runner upload costs, function by function: a GitHub Actions matrix
job (1 of 2) POSTs to ``/upload`` and PUTs its archive, as the runner does, through the local stack
(its gateway, its pollers as Lambda's event source mappings, moto's S3 events), in the default mode
(``parts``): counted, sent upstream as its own part, the report published. Then the second job, whose
upload completes the run: what the run's end adds, once a run. Every call each function's clients
send is counted (botocore's before-call hook: a presigned URL is no call), listed by operation.

    python bench/upload_calls.py             # both, then ``upload_calls: api=A arrivals=B finalizer=C total=T``
    python bench/upload_calls.py --most 24   # exit 1 when one upload costs more (make bench-smoke)
    python bench/upload_calls.py --trace     # the first upload's calls in order
"""

import argparse
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT), str(ROOT / "local")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before the handlers make their loggers

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.adapters.ledger.codec import RUN_SK, run_pk
from codspeed_aggregator.domain.records import FORWARDED
from codspeed_local.stack import LocalStack
from tests import runner

FUNCTIONS = (wiring.API, wiring.ARRIVALS, wiring.FINALIZER)
SERVICES = ("dynamodb", "s3", "sqs", "ssm")


class CallCounter:
    """Each function's calls, by service and operation, counted on the function's own clients when
    they are sent (a presigned URL is built, not sent: not a call)."""

    def __init__(self) -> None:
        self.calls: dict[str, Counter] = {f: Counter() for f in FUNCTIONS}
        self.trace: list[str] = []  # every call in order, for --trace
        self.lock, self.asked = threading.Lock(), threading.local()
        for function in FUNCTIONS:
            for service in SERVICES:
                events = client(service, function).meta.events
                events.register("before-parameter-build.*.*", self._asked)
                events.register("before-call.*.*", self._hook(function, service))

    def _asked(self, params, **_):
        self.asked.params = dict(params)

    def _hook(self, function: str, service: str):
        def hook(model, **_):
            with self.lock:
                self.calls[function][f"{service}.{model.name}"] += 1
                self.trace.append(f"{function} {service}.{model.name} {_what(getattr(self.asked, 'params', {}))}")

        return hook


def _what(params: dict) -> str:
    """What a call names: an object's key, an item's sort key, a query's condition."""
    key = params.get("Key")
    if isinstance(key, str):
        return key.rsplit("/", 2)[-2:] and "/".join(key.split("/")[:1] + key.split("/")[-2:])
    if isinstance(key, dict):
        return str(key.get("sk", {}).get("S", ""))
    if "KeyConditionExpression" in params:
        return str(params["KeyConditionExpression"]) + " " + str(params.get("ExpressionAttributeValues", {}))[:80]
    if "RequestItems" in params:
        return str(params["RequestItems"])[:160]
    if "TransactItems" in params:
        return " + ".join(
            f"{kind}:{item.get('Key', {}).get('sk', {}).get('S', '')}"
            for t in params["TransactItems"]
            for kind, item in t.items()
        )
    return str({k: v for k, v in params.items() if k in ("Prefix", "Name", "QueueUrl")})[:100]


def one_upload(stack: LocalStack, project: str, run_id: str, job: int) -> None:
    """Job ``job`` of a matrix of two, as the runner uploads it."""
    owner, repository = project.split("/")
    archive = runner.recorded(job)
    part = runner.github_run_part(run_id, "bench", "valgrind", matrix={"n": job}, job_index=job - 1, job_total=2)
    metadata = runner.metadata(
        archive, executor="valgrind", owner=owner, repository=repository, commit="a" * 40, run_part=part
    )
    up = runner.upload(stack.api_url, runner.Upload(metadata, archive, token=stack.token))
    assert up.put is not None and up.put.ok, (up.post.status_code if up.post else None, up.post and up.post.text)


def wait_for(stack: LocalStack, project: str, run_id: str, done, quiet: float = 3.0) -> None:
    """Until ``done`` holds of the run's items and, after, no function made a call for ``quiet``
    seconds; read with the operator's own client, counted with no function's."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        items = client("dynamodb").query(
            TableName=stack.resources.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": run_pk(project, run_id)}},
            ConsistentRead=True,
        )["Items"]
        if done(items):
            time.sleep(quiet)
            return
        time.sleep(0.2)
    raise SystemExit(f"run {run_id} of {project} did not get there within 120 s")


def _upstream(items: list[dict]) -> bool:
    return any(i["sk"]["S"].startswith("SHARD#") and "upstream" in i for i in items)


def _forwarded(items: list[dict]) -> bool:
    return any(i["sk"]["S"] == RUN_SK and i["state"]["S"] == FORWARDED for i in items)


def _counted(counter: CallCounter, step) -> dict[str, Counter]:
    with counter.lock:
        for counted in counter.calls.values():
            counted.clear()
        counter.trace.clear()
    step()
    with counter.lock:
        return {f: Counter(c) for f, c in counter.calls.items()}


def _show(title: str, calls: dict[str, Counter]) -> int:
    total = sum(sum(c.values()) for c in calls.values())
    print(f"{title}: {total} calls")
    for function, counted in calls.items():
        print(f"  {function}: {sum(counted.values())}: " + ", ".join(f"{op} {n}" for op, n in sorted(counted.items())))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--most", type=int, help="exit 1 when one upload costs more calls than this")
    parser.add_argument("--trace", action="store_true", help="every call, in order")
    args = parser.parse_args()
    project, run_id = "acme/calls", f"{int(time.time())}"
    with LocalStack(env={"FORWARD_MODE": "parts"}) as stack:
        counter = CallCounter()

        def first() -> None:
            one_upload(stack, project, run_id, 1)
            wait_for(stack, project, run_id, _upstream)

        def last() -> None:
            one_upload(stack, project, run_id, 2)
            wait_for(stack, project, run_id, _forwarded)

        one = _counted(counter, first)
        traced = list(counter.trace)
        end = _counted(counter, last)
    if args.trace:
        print("\n".join(traced))
    total = _show("one upload (job 1 of 2: counted, upstream as its own part, the report published)", one)
    _show("the last upload and the run's end (job 2 of 2: the run complete, finished, its baseline recorded)", end)
    print(" ".join(["upload_calls:", *(f"{f}={sum(c.values())}" for f, c in one.items()), f"total={total}"]))
    return 1 if args.most is not None and total > args.most else 0


if __name__ == "__main__":
    sys.exit(main())
