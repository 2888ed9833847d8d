"""Load, faults, bad input and auth, on the local stack, with the figures printed.

    python bench/load.py            # 500 shards of one run, every S3 event delivered 3 times
    python bench/load.py --quick    # 40 shards: a smoke for CI

Arrivals are driven the way SQS drives the arrivals function: each S3 notification that
moto sent is delivered 3 times, in random order, by 8 concurrent workers, while a close
races the last ones. AWS requests are counted with botocore's event hooks.
Ends with one line per area: load, faults, bad inputs, auth.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before the handlers make their loggers

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.handlers.arrivals import s3_objects
from codspeed_local.stack import LocalStack
from tests.factories import bundle, upload_request

PROJECT = "acme/load"


class RequestCounter:
    """Counts AWS requests per service, per thread, through botocore's before-call hook."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.total = Counter()
        for function in (wiring.API, wiring.ARRIVALS, wiring.FINALIZER):  # each function's own clients
            for service in ("dynamodb", "s3", "sqs"):
                client(service, function).meta.events.register("before-call.*.*", self._count(service))

    def _count(self, service):
        def hook(**_):
            self.total[service] += 1
            if getattr(self.local, "counts", None) is not None:
                self.local.counts[service] += 1

        return hook

    def measure(self, fn):
        self.local.counts = Counter()
        result = fn()
        counts, self.local.counts = self.local.counts, None
        return result, counts


def push_all(stack, run_id: str, shards: int) -> None:
    session = requests.Session()
    session.headers["Authorization"] = stack.token

    def push(index: int) -> None:
        data = bundle(4242, [f"tests/test_{index}.py::bench"])
        grant = session.post(
            f"{stack.api_url}/v1/uploads",
            timeout=30,
            json=upload_request(PROJECT, run_id, str(index), data, total=shards),
        ).json()
        requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(push, range(1, shards + 1)))


def collect_events(stack, run_id: str, count: int) -> list[dict]:
    """The S3 notifications moto sent to the arrivals queue for this run (its test event skipped),
    each object's once: SQS delivers at least once, and the benches deliver them as they choose."""
    # moto delivers S3's notifications from the PUTs' threads: at 1000 shards on a busy machine,
    # over two minutes (the deadline once was a fixed 120 s, and a bench counted what came by then)
    sqs, events, seen, waited = client("sqs"), [], set(), time.monotonic() + 120 + count
    while len(events) < count and time.monotonic() < waited:
        for message in sqs.receive_message(QueueUrl=stack.resources.arrivals_queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            body = json.loads(message["Body"])
            objects = tuple(s3_objects(body))
            if any(f"/{run_id}/" in key for key, _, _ in objects) and objects not in seen:
                seen.add(objects)
                events.append(body)
            sqs.delete_message(QueueUrl=stack.resources.arrivals_queue_url, ReceiptHandle=message["ReceiptHandle"])
    if len(events) < count:
        raise SystemExit(
            f"only {len(events)} of the {count} S3 notifications of run {run_id} reached the arrivals "
            f"queue within {120 + count} s"
        )
    return events


BATCH = 10  # the arrivals event source's batch size (template.yaml)


def _finalize_queued(stack) -> tuple[list[dict], Counter]:
    """Every finalize message queued, received and handled at once: the messages (complete, close)
    race each other too. Answers them, and how many finalizations ended in each state."""
    sqs, messages = client("sqs"), []
    for _ in range(20):
        batch = sqs.receive_message(QueueUrl=stack.resources.finalize_queue_url, MaxNumberOfMessages=10)
        messages += batch.get("Messages", [])
        for m in batch.get("Messages", []):
            sqs.delete_message(QueueUrl=stack.resources.finalize_queue_url, ReceiptHandle=m["ReceiptHandle"])
    finalizing = wiring.for_finalizer().finalize_run
    with ThreadPoolExecutor(4) as pool:
        states = pool.map(
            lambda m: finalizing.finalize(**{k: v for k, v in json.loads(m["Body"]).items() if k != "reason"}), messages
        )
        return messages, Counter(states)


def load(stack, counter: RequestCounter, shards: int) -> tuple[str, bool]:
    run_id = f"load-{int(time.time())}"
    before = counter.total["dynamodb"]
    push_all(stack, run_id, shards)
    per_grant = (counter.total["dynamodb"] - before) / shards
    events = collect_events(stack, run_id, shards)
    deliveries = [e for e in events for _ in range(3)]
    random.Random(42).shuffle(deliveries)
    agg = wiring.for_arrivals()
    outcomes, per_arrival, lock = Counter(), [], threading.Lock()
    close_at = len(deliveries) - max(5, len(deliveries) // 50)

    batches = [list(enumerate(deliveries))[i : i + BATCH] for i in range(0, len(deliveries), BATCH)]
    per_publish = []

    def deliver(batch):
        """One arrivals invocation: a batch of events, each run's report published once at its end."""

        def arrivals():
            with agg.reports.held():
                for position, event in batch:
                    if position == close_at:
                        requests.post(
                            f"{stack.api_url}/v1/runs/close",
                            json={"project": PROJECT, "run_id": run_id},
                            headers={"Authorization": stack.token},
                            timeout=30,
                        ).raise_for_status()
                    for key, size, version_id in s3_objects(event):
                        outcome, counts = counter.measure(
                            lambda key=key, size=size, version_id=version_id: agg.record_arrival.record(
                                key, size, version_id
                            )
                        )
                        with lock:
                            outcomes[outcome] += 1
                            if outcome == "recorded":
                                per_arrival.append(counts)
                counter.local.counts = Counter()  # from here: the batch's publish
            return counter.local.counts

        _, publish = counter.measure(arrivals)
        with lock:
            per_publish.append(publish)

    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(deliver, batches))
    wall = time.perf_counter() - start

    messages, finalizations = _finalize_queued(stack)
    report = agg.reports.report(PROJECT, run_id)
    for shard in (s for s in report.shards if s.state != "arrived"):
        print(f"  shard {shard.name}: {shard.state} ({shard.reason})")
    print(f"  distinct events collected: {len({k for e in events for k, _, _ in s3_objects(e)})}")
    uploads = stack.upstream.uploads(run_id)
    counted = report.arrived + sum(s.state == "late" for s in report.shards)
    worst = {s: max(c[s] for c in per_arrival) for s in ("dynamodb", "s3")}
    mean = {s: sum(c[s] for c in per_arrival) / len(per_arrival) for s in ("dynamodb", "s3", "sqs")}
    print(
        f"shards: {shards}; events delivered: {len(deliveries)}; outcomes: {dict(outcomes)}; "
        f"duplicates absorbed: {outcomes['duplicate']}"
    )
    print(
        f"counted: {report.arrived} arrived + {counted - report.arrived} late = {counted}; finalize messages: "
        f"{len(messages)}, finalizations: {finalizations['forwarded']} (others: {dict(finalizations)}); uploads: "
        f"{len(uploads)}"
    )
    print(
        f"wall time: {wall:.2f} s for {len(deliveries)} deliveries, {wall / len(deliveries) * 1000:.1f} ms per "
        "delivery, "
        f"{wall / shards * 1000:.1f} ms per arrival (8 workers)"
    )
    print(
        f"AWS requests per counted arrival: dynamodb mean {mean['dynamodb']:.2f} max {worst['dynamodb']}, "
        f"s3 mean {mean['s3']:.2f} max {worst['s3']}, sqs mean {mean['sqs']:.3f}; per upload grant: dynamodb "
        f"{per_grant:.2f} "
        f"(4 a grant, 1 a run)"
    )
    publish = {s: max(c[s] for c in per_publish) for s in ("dynamodb", "s3")}
    print(
        f"per batch of {BATCH} events (its reports published once per run): at most {publish['dynamodb']} DynamoDB "
        f"and {publish['s3']} S3 requests"
    )
    checks = {
        "every shard counted once": counted == shards,
        "one finalization": finalizations["forwarded"] == 1,
        # the run, its tallies, the shard and the upload request; the tally's revision just before the transaction
        # (where its note of the change goes); the transaction; the run's counts after it
        "one upload": len(uploads) == 1,
        "<= 4 DynamoDB requests an arrival": worst["dynamodb"] <= 4,
        # the bundle's GET, its normalized copy and index, and its results (results/, never cut to fit an item)
        "<= 4 S3 requests an arrival": worst["s3"] <= 4,
        "<= 4 DynamoDB requests a batch's publish": publish["dynamodb"] <= 4,
        # the run (read, or opened), the upload's metadata and its record, and its count on the run item: the
        # close's barrier claims the run at the count it read, so no upload granted before a close is missed
        "4 DynamoDB requests a grant, 1 a run": per_grant * shards <= 4 * shards + 1,
    }
    for name, passed in checks.items():
        if not passed:
            print(f"  load MISSED: {name}")
    ok = all(checks.values())
    line = (
        f"load: {shards} shards, {len(deliveries)} events, {outcomes['duplicate']} duplicates absorbed, "
        f"{finalizations['forwarded']} finalization, {len(uploads)} upload, "
        f"{wall / shards * 1000:.1f} ms per arrival, <= {worst['dynamodb']} DynamoDB and <= {worst['s3']} S3 requests "
        "per arrival"
    )
    return line, ok


def survived(label: str, attempts) -> tuple[int, int]:
    """Run each (name, check); a check that raises did not survive: say which and why."""
    done = 0
    for name, check in attempts:
        try:
            check()
            done += 1
        except Exception as exc:  # report every failure, then go on with the others
            print(f"  {label} FAILED: {name}: {type(exc).__name__}: {exc}")
    return len(attempts), done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 shards")
    parser.add_argument("--shards", type=int, help="shards in the run (default 500)")
    args = parser.parse_args()
    shards = args.shards or (40 if args.quick else 500)
    from tests import auth_cases, bad_inputs, faults, isolated

    with (
        LocalStack(pollers=False, webhook_secret="bench-secret", env={"FORWARD_MODE": "one-upload"}) as stack,
        tempfile.TemporaryDirectory() as tmp,
    ):
        line, load_ok = load(stack, RequestCounter(), shards)
        side = isolated.build(Path(tmp), prefix="bench-faults", enforcer=stack.enforcer)
        injected, fault_ok = survived(
            "fault",
            [
                *[(step, lambda s=step: faults.finalize_scenario(side, s)) for step in faults.FINALIZE_FAULTS],
                *[(step, lambda s=step: faults.arrival_scenario(side, s)) for step in faults.ARRIVAL_FAULTS],
            ],
        )
        target = bad_inputs.Target(stack.api_url, stack.token, wiring.for_arrivals())
        tried, refused = survived(
            "bad input", [(name, lambda n=name, f=refuse: f(target, n)) for name, refuse in bad_inputs.CASES]
        )
        checks = auth_cases.cases(stack, wiring.for_operator().project_tokens, "bench-secret")
        auth_total, auth_ok = survived(
            "auth", [(name, lambda c=call, st=st, n=name: _expect(c().status_code, st, n)) for name, call, st in checks]
        )
        side.upstream.stop()
    print()
    print(line)
    print(f"faults: {injected} injected, {fault_ok} survived")
    print(f"bad inputs: {tried} tried, {refused} refused cleanly")
    print(f"auth: {auth_total} cases, {auth_ok} answered as expected")
    return 0 if load_ok and fault_ok == injected and refused == tried and auth_ok == auth_total else 1


def _expect(got: int, expected: int, name: str) -> None:
    if got != expected:
        raise AssertionError(f"{name}: answered {got}, expected {expected}")


if __name__ == "__main__":
    sys.exit(main())
