"""Does what a run costs per arrival grow with the run? The same small real bundles through
the local stack at two sizes, one S3 event per shard, delivered in the arrivals function's
batches of 10 (each run's report published once per batch, as SQS drives it).

    python bench/growth.py            # 10 and 1000 shards (parts: 20 and 1000)
    python bench/growth.py --quick    # 10 and 100 shards (make bench-smoke: exit 1 past a bound below)

Both sizes go through one arrivals process; then the larger again with its batches round-robin
over 4 processes (``--processes``), each with what it read of the run before, as Lambda spreads
a queue's batches over its instances, and its last batch by a fifth process, new to the run
(a cold start): each process reads each change once. Its first rebuild of a run starts
from what the last publisher left beside the report in S3: what it read of the ledger (the shards
and the tallies' revisions: from DynamoDB, the process reads the run's and its baseline's records
and tallies and the shards changed since) and what it summed up of the results (the results read
are those of the shards it does not cover). Printed apart; only the very first process reads the
run and its baseline whole.

Printed for each size: AWS requests per counted arrival (DynamoDB, S3), for a runner's bundle
and for one ``codspeed-client pack`` normalized; per batch's report rebuild, its requests,
bytes read (DynamoDB, S3), handler time and how many read the run whole; per run, the table's items and bytes and the
results' objects and bytes in the bucket; the time from the last arrival to the forward.
The last line reads ``growth: shards=A->B arrival_requests_ratio=R rebuild_s3_bytes_ratio=R
rebuild_dynamodb_bytes_ratio=R rebuild_cpu_seconds_max=S late_rebuild_dynamodb_bytes_ratio=R
late_rebuild_s3_requests=N late_rebuild_whole_reads=N``, each ratio the larger run's figure over the
smaller's, but the late one: the new process's DynamoDB bytes over a steady rebuild's of the same
run (target: <= 1.2 for each; a rebuild reads the shards changed since its
process's last read of the run, and the run whole when the tallies' notes cannot name them all:
see the README's limits). A rebuild's time is the
publishing thread's own CPU (its code and boto3's): the wall time around it is mostly waiting
on moto, whose Query and transactions walk the whole table, as DynamoDB's do not.

Then a run of a project in parts mode at both sizes (the smaller 20, two batches): the same
figures, and per shard sent upstream as its own run part (the finalizer's message for it) its
requests and the bytes it read; the last line adds ``parts_shards=A->B`` and the same ratios
prefixed ``parts_``, with ``parts_forward_requests_ratio`` and ``parts_forward_dynamodb_bytes_ratio``
(target: <= 1.2 each; a send reads the run's record and its one shard, never the run whole).

Last, what a run bills in each mode at 10, 100 and the larger size (``bench/billing.py``: DynamoDB
request units from the items' sizes with AWS's rounding, S3 requests by price class, SQS
requests, each bundle's PUT by its job), in units and in dollars at us-east-1 prices.
"""

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before the handlers make their loggers

from billing import BilledUnits
from load import BATCH, RequestCounter, collect_events

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.adapters.ledger.codec import dump
from codspeed_aggregator.domain.keys import parse_bundle_key, project_segment
from codspeed_aggregator.handlers.arrivals import s3_objects
from codspeed_local.stack import LocalStack
from tests.factories import bundle, packed, upload_request

PROJECT, PARTS_PROJECT = "acme/growth", "acme/growth-parts"  # the second's runs go upstream shard by shard
TARGET_RATIO = 1.2


class ByteCounter:
    """Bytes each function's clients read (a DynamoDB answer's body, an S3 object's length), and
    the Queries that read a run whole (``Reads.snapshot``)."""

    def __init__(self) -> None:
        self.read, self.whole_reads = Counter(), 0
        for function in (wiring.ARRIVALS, wiring.FINALIZER):
            for service in ("dynamodb", "s3"):
                client(service, function).meta.events.register("after-call.*.*", self._count(service))
            client("dynamodb", function).meta.events.register("before-parameter-build.dynamodb.Query", self._whole)

    def _whole(self, params, **_):
        self.whole_reads += params.get("KeyConditionExpression", "").endswith("sk < :uploads")

    def _count(self, service):
        def hook(http_response, parsed, model, **_):
            if service == "s3":
                if model.name == "GetObject":
                    self.read[service] += parsed.get("ContentLength") or 0
            else:
                self.read[service] += len(http_response.content or b"")

        return hook


def push(stack, run_id: str, shards: int, project: str) -> dict[str, str]:
    """Every shard pushed as a shard job would (a grant, then the PUT); answers each shard's kind."""
    session = requests.Session()
    session.headers["Authorization"] = stack.token
    kinds = {str(i): "packed" if i % 2 else "runner" for i in range(1, shards + 1)}

    def one(shard: str) -> None:
        data = bundle(4242, [f"tests/test_{shard}.py::bench_{j}" for j in range(3)])
        data = packed(data) if kinds[shard] == "packed" else data
        grant = session.post(
            f"{stack.api_url}/v1/uploads", timeout=30, json=upload_request(project, run_id, shard, data, total=shards)
        ).json()
        requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, kinds))
    return kinds


def billing() -> BilledUnits:
    """The billed units of every request the functions' clients make (the operator's reads items whole)."""
    functions = (wiring.API, wiring.ARRIVALS, wiring.FINALIZER)
    return BilledUnits({s: [client(s, f) for f in functions] for s in ("dynamodb", "s3", "sqs")}, client("dynamodb"))


def measure(
    stack,
    counter: RequestCounter,
    nbytes: ByteCounter,
    shards: int,
    processes: int,
    project: str = PROJECT,
    billed: BilledUnits | None = None,
) -> dict:
    run_id = f"growth-{shards}-{int(time.time() * 1000)}"
    run_began = billed.snapshot() if billed else Counter()
    kinds = push(stack, run_id, shards, project)
    events = collect_events(stack, run_id, shards)
    aggs = [wiring.build(wiring.ARRIVALS, wiring.settings()) for _ in range(processes)]  # each knows nothing yet
    per_arrival, per_forward, later = {"runner": [], "packed": []}, [], []
    rebuilds, last_arrival, published = [], 0.0, set()
    for start in range(0, len(events), BATCH):
        batch, agg = events[start : start + BATCH], aggs[start // BATCH % processes]
        if processes > 1 and start + BATCH >= len(events):  # the last batch: a process new to the run takes it
            agg = wiring.build(wiring.ARRIVALS, wiring.settings())
        first, _ = id(agg) not in published, published.add(id(agg))
        with agg.reports.held():
            for event in batch:
                for key, size, version_id in s3_objects(event):
                    made = Counter(counter.total)  # all threads' (a report reads results in parallel): one driver here
                    outcome = agg.record_arrival.record(key, size, version_id)
                    assert outcome == "recorded", (
                        outcome,
                        key,
                        size,
                        version_id,
                        agg.ledger.reads.arrival_view(*parse_bundle_key(key)),
                    )
                    per_arrival[kinds[key.split("/")[-2]]].append(counter.total - made)
            before, made, began, cpu = (
                dict(nbytes.read),
                Counter(counter.total),
                time.perf_counter(),
                time.thread_time(),
            )
            whole_before = nbytes.whole_reads
        elapsed = time.perf_counter() - began  # the batch's publish, at the end of held()
        rebuilds.append(
            {
                "requests": counter.total - made,
                "seconds": elapsed,
                "cpu": time.thread_time() - cpu,
                "bytes": {s: nbytes.read[s] - before.get(s, 0) for s in ("dynamodb", "s3")},
                "whole": nbytes.whole_reads - whole_before,
                "first": first,
            }
        )
        last_arrival = time.perf_counter()
        per_forward += drain(stack, run_id, counter, nbytes, later)  # a parts run's shards, as the batch counted them
    forwarded_after = finalize(stack, run_id, last_arrival, later)
    run_units = (billed.snapshot() if billed else Counter()) - run_began
    run_units["s3_put"] += shards  # each bundle's PUT, by its shard job to the presigned URL
    report = aggs[0].reports.report(project, run_id)
    assert report.arrived == shards and report.state == "forwarded", (report.arrived, report.state)
    assert report.counts.measured == 3 * shards, report.counts
    items, item_bytes = table_footprint(stack, run_id, project)
    objects, object_bytes = results_footprint(stack, run_id, project)

    def mean(rows, key):
        return sum(r[key] for r in rows) / len(rows)

    late = rebuilds.pop() if processes > 1 else None  # the last batch's, by a process new to the run
    firsts = [r for r in rebuilds if r["first"]]  # a process's first: the run (and its baseline) read whole
    steady = [r for r in rebuilds if not r["first"]] or firsts  # a run of one batch has only its first
    return {
        "shards": shards,
        "arrival": {kind: {s: mean(rows, s) for s in ("dynamodb", "s3")} for kind, rows in per_arrival.items() if rows},
        "rebuild_requests": {s: max(r["requests"][s] for r in steady) for s in ("dynamodb", "s3")},
        "rebuild_bytes": {s: sum(r["bytes"][s] for r in steady) / len(steady) for s in ("dynamodb", "s3")},
        "first_bytes": {s: sum(r["bytes"][s] for r in firsts) / len(firsts) for s in ("dynamodb", "s3")},
        "rebuild_seconds": {"mean": mean(rebuilds, "seconds"), "max": max(r["seconds"] for r in rebuilds)},
        "rebuild_cpu": {"mean": mean(rebuilds, "cpu"), "max": max(r["cpu"] for r in rebuilds)},
        "rebuilds": len(steady),
        "whole_reads": sum(r["whole"] > 0 for r in steady if not r["first"]),
        "processes": processes,
        "table": {"items": items, "bytes": item_bytes},
        "results": {"objects": objects, "bytes": object_bytes},
        "forwarded_after": forwarded_after,
        "late": late,
        "project": project,
        "billed": run_units,
        "forward": {k: sum(f[k] for f in per_forward) / len(per_forward) for k in per_forward[0]}
        if per_forward
        else None,
    }


def drain(stack, run_id: str, counter: RequestCounter, nbytes: ByteCounter, later: list[dict]) -> list[dict]:
    """Each shard message of the run handled as the finalizer function would: its requests
    (every service's), and the bytes it read (DynamoDB, S3). The run's other messages go to ``later``."""
    sqs, forwarding, found = client("sqs"), wiring.for_finalizer().forward_shard, []
    while messages := sqs.receive_message(QueueUrl=stack.resources.finalize_queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        for m in messages:
            sqs.delete_message(QueueUrl=stack.resources.finalize_queue_url, ReceiptHandle=m["ReceiptHandle"])
            body = json.loads(m["Body"])
            if body["run_id"] != run_id or body.get("shard") is None:
                later.append(body)
                continue
            made, before = Counter(counter.total), dict(nbytes.read)
            assert forwarding.forward(body["project"], run_id, body["shard"]) == "forwarded"
            found.append(
                {
                    **{s: counter.total[s] - made[s] for s in ("dynamodb", "s3", "sqs")},
                    **{f"{s}_bytes": nbytes.read[s] - before.get(s, 0) for s in ("dynamodb", "s3")},
                }
            )
    return found


def finalize(stack, run_id: str, last_arrival: float, taken: list[dict]) -> float:
    """The finalize messages (those ``taken`` off the queue already, then the queue's) handled as
    the finalizer function would; seconds from the last arrival."""
    sqs, finalizing = client("sqs"), wiring.for_finalizer().finalize_run
    for _ in range(50):
        messages = sqs.receive_message(QueueUrl=stack.resources.finalize_queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages and not taken:
            break
        for m in messages:
            sqs.delete_message(QueueUrl=stack.resources.finalize_queue_url, ReceiptHandle=m["ReceiptHandle"])
        for body in [*taken, *(json.loads(m["Body"]) for m in messages)]:
            if body["run_id"] == run_id:
                finalizing.finalize(body["project"], run_id, body.get("part"))
        taken = []
    return time.perf_counter() - last_arrival


def table_footprint(stack, run_id: str, project: str) -> tuple[int, int]:
    """The run's items and their bytes as DynamoDB sizes them (names and values, UTF-8)."""
    db = client("dynamodb")
    pages = db.get_paginator("query").paginate(
        TableName=stack.resources.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues=dump({":pk": f"RUN#{project}#{run_id}"}),
    )
    items = [i for page in pages for i in page["Items"]]
    return len(items), sum(len(json.dumps(i, default=_binary)) for i in items)


def _binary(value: object) -> str:
    """A binary attribute (a POST body kept as it came) as its bytes' count of characters."""
    assert isinstance(value, bytes), type(value)
    return "b" * len(value)


def results_footprint(stack, run_id: str, project: str) -> tuple[int, int]:
    s3 = client("s3")
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=stack.resources.bucket, Prefix=f"results/{project_segment(project)}/{run_id}/"
    )
    objects = [o for page in pages for o in page.get("Contents", [])]
    return len(objects), sum(o["Size"] for o in objects)


def ratio(big: float, small: float) -> float:
    return big / small if small else (1.0 if not big else float("inf"))


def compare(small: dict, big: dict) -> dict:
    def per(m):
        return sum(sum(v.values()) for v in m["arrival"].values()) / len(m["arrival"])

    return {
        "arrival_requests_ratio": ratio(per(big), per(small)),
        "rebuild_s3_bytes_ratio": ratio(big["rebuild_bytes"]["s3"], small["rebuild_bytes"]["s3"]),
        "rebuild_dynamodb_bytes_ratio": ratio(big["rebuild_bytes"]["dynamodb"], small["rebuild_bytes"]["dynamodb"]),
        "rebuild_cpu_seconds_max": big["rebuild_cpu"]["max"],
    }


@contextmanager
def both_modes() -> Iterator[tuple[LocalStack, RequestCounter, ByteCounter, BilledUnits]]:
    """A local stack whose ``PROJECT`` runs one upload a run and ``PARTS_PROJECT`` a part a shard, no
    poller (the caller delivers each event), with what ``measure`` counts: requests, bytes, billed units."""
    with LocalStack(
        pollers=False,
        webhook_secret="bench-secret",
        env={"FORWARD_MODE": "one-upload", "FORWARD_MODES": f"{PARTS_PROJECT}=parts"},
    ) as stack:
        yield stack, RequestCounter(), ByteCounter(), billing()


def run(sizes: tuple[int, int], processes: int) -> tuple[list[dict], dict, dict, list[dict], dict, list[dict]]:
    """Both sizes through one process, then the larger through ``processes``; then both sizes of
    a parts run (each shard sent upstream as the batch counted it) through one process; and what
    each mode's runs of 10 and 100 shards (and the larger) bill."""
    with both_modes() as (stack, counter, nbytes, billed):
        found = [measure(stack, counter, nbytes, n, 1, billed=billed) for n in sizes]
        spread = measure(stack, counter, nbytes, sizes[1], processes)
        # a parts run's smaller size has two batches: each steady rebuild reads its batch's arrivals and
        # the sends of the batch before, so steady is compared with steady (10 shards have only a first, whole read)
        in_parts = [
            measure(stack, counter, nbytes, n, 1, PARTS_PROJECT, billed) for n in (max(sizes[0], 2 * BATCH), sizes[1])
        ]
        costs = [m for m in found if m["shards"] in (10, 100) or m is found[-1]]
        costs += [measure(stack, counter, nbytes, 10, 1, PARTS_PROJECT, billed)] + [
            m for m in in_parts if m["shards"] != 20
        ]
        if sizes[1] != 100:
            costs += [measure(stack, counter, nbytes, 100, 1, project, billed) for project in (PROJECT, PARTS_PROJECT)]
    parts_ratios = compare(*in_parts)
    parts_ratios["forward_requests_ratio"] = ratio(
        *(sum(m["forward"][s] for s in ("dynamodb", "s3", "sqs")) for m in reversed(in_parts))
    )
    parts_ratios["forward_dynamodb_bytes_ratio"] = ratio(
        in_parts[1]["forward"]["dynamodb_bytes"], in_parts[0]["forward"]["dynamodb_bytes"]
    )
    return (
        found,
        compare(*found),
        spread,
        in_parts,
        parts_ratios,
        sorted(costs, key=lambda m: (m["project"], m["shards"])),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 and 100 shards")
    parser.add_argument("--shards", type=int, help="the larger run's shards (default 1000)")
    parser.add_argument("--processes", type=int, default=4, help="arrivals processes of the last run (default 4)")
    args = parser.parse_args()
    sizes = (10, args.shards or (100 if args.quick else 1000))
    found, ratios, spread, in_parts, parts_ratios, costs = run(sizes, args.processes)
    for m in (*found, spread, *in_parts):
        if m is in_parts[0]:
            print("a parts run (each shard sent upstream as its own run part when counted), at both sizes:")
        if m is spread:
            print(f"the {m['shards']} shards again, their batches spread over {m['processes']} processes:")
        arrival = ", ".join(
            f"{kind}: dynamodb {c['dynamodb']:.2f} s3 {c['s3']:.2f}" for kind, c in m["arrival"].items()
        )
        print(
            f"{m['shards']} shards: requests per counted arrival ({arrival}); per report rebuild (a batch of {BATCH}): "
            f"at most {m['rebuild_requests']['dynamodb']} DynamoDB and {m['rebuild_requests']['s3']} S3 requests, "
            f"{m['rebuild_bytes']['dynamodb'] / 1024:.1f} KiB read from DynamoDB and "
            f"{m['rebuild_bytes']['s3'] / 1024:.1f} KiB from S3; the handler's own CPU "
            f"{m['rebuild_cpu']['mean'] * 1000:.0f} ms mean {m['rebuild_cpu']['max'] * 1000:.0f} ms max, "
            f"{m['rebuild_seconds']['max'] * 1000:.0f} ms max with the waits on moto; "
            f"{m['whole_reads']} of {m['rebuilds']} read the run whole"
        )
        if m is spread:
            arrivals = m["rebuilds"] * BATCH * m["processes"]  # what each later rebuild finds changed since its last
            print(
                f"  each change is read once by each process that publishes the run: "
                f"{m['rebuild_bytes']['dynamodb'] * m['rebuilds'] / arrivals / 1024:.2f} KiB from DynamoDB per arrival "
                f"per process; a process's first rebuild: {m['first_bytes']['dynamodb'] / 1024:.1f} KiB from DynamoDB, "
                f"{m['first_bytes']['s3'] / 1024:.1f} KiB from S3 (the first process's reads the run and its baseline "
                f"whole; the others', what the last publisher read of the ledger and summed up of the results, "
                f"and what changed since)"
            )
            late = m["late"]
            print(
                f"  a process new to the run takes its last batch: {late['requests']['dynamodb']} DynamoDB and "
                f"{late['requests']['s3']} S3 requests, {late['bytes']['dynamodb'] / 1024:.1f} KiB read from DynamoDB "
                f"(the run's and its baseline's records and tallies, the shards changed since the last publisher's "
                f"read: {late['whole']} whole reads), {late['bytes']['s3'] / 1024:.1f} KiB from S3 (that read, the "
                "last "
                f"report's digest and the results it does not cover), its own CPU {late['cpu'] * 1000:.0f} ms"
            )
        print(
            f"  per run: {m['table']['items']} items, {m['table']['bytes'] / 1024:.0f} KiB in the table; "
            f"{m['results']['objects']} results objects, {m['results']['bytes'] / 1024:.0f} KiB in the bucket; "
            f"forwarded {m['forwarded_after']:.2f} s after the last arrival"
        )
        if m["forward"]:
            f = m["forward"]
            print(
                f"  per shard sent upstream: {f['dynamodb']:.1f} DynamoDB, {f['s3']:.1f} S3 and {f['sqs']:.1f} SQS "
                "requests, "
                f"{f['dynamodb_bytes'] / 1024:.2f} KiB read from DynamoDB and {f['s3_bytes'] / 1024:.2f} KiB from S3 "
                "(the archive itself streams to the upstream)"
            )
    print(
        "billed (DynamoDB request units from the items' sizes with AWS's rounding, S3 requests by class, SQS "
        "requests; us-east-1 prices): a run, the functions' requests and each bundle's PUT"
    )
    for m in costs:
        b, mode = (
            m["billed"],
            "parts (a part per shard)" if m["project"] == PARTS_PROJECT else "one-upload (one upload per run)",
        )
        print(
            f"  {mode}, {m['shards']} shards: {b['dynamodb_read']:.0f} read and {b['dynamodb_write']:.0f} write units, "
            f"{b['s3_put']} PUT-class and {b['s3_get']} GET-class S3 requests, {b['sqs']} SQS requests: "
            f"${BilledUnits.dollars(b):.4f} a run, ${BilledUnits.dollars(b) / m['shards'] * 1000:.3f} per 1000 shards"
        )
    late = spread["late"]
    ratios["late_rebuild_dynamodb_bytes_ratio"] = ratio(late["bytes"]["dynamodb"], spread["rebuild_bytes"]["dynamodb"])
    print(
        f"growth: shards={sizes[0]}->{sizes[1]} "
        + " ".join(f"{k}={v:.2f}" for k, v in ratios.items())
        + f" late_rebuild_s3_requests={late['requests']['s3']} "
        + f"late_rebuild_whole_reads={late['whole']} "
        + f"parts_shards={in_parts[0]['shards']}->{in_parts[1]['shards']} "
        + " ".join(f"parts_{k}={v:.2f}" for k, v in parts_ratios.items() if k != "rebuild_cpu_seconds_max")
    )
    checked = {**ratios, **{f"parts_{k}": v for k, v in parts_ratios.items()}}
    missed = [f"{k} over {TARGET_RATIO}" for k in checked if k.endswith("_ratio") and checked[k] > TARGET_RATIO]
    # a partial report's rebuild at the larger size; a process's later rebuilds never read the run whole;
    # a process new to the run reads the last report's digest and the ledger as its publisher read it, the
    # baseline's, the batch's results and their baseline's, and publishes (without the digest: a GET a shard more)
    bounds = {
        "rebuild_cpu_seconds_max under 1 s": ratios["rebuild_cpu_seconds_max"] < 1.0,
        "no later rebuild reads the run whole": spread["whole_reads"] == 0,
        "late_rebuild_s3_requests at most 30": late["requests"]["s3"] <= 30,
        "late_rebuild_whole_reads 0": late["whole"] == 0,
    }
    missed += [bound for bound, held in bounds.items() if not held]
    for bound in missed:
        print(f"  growth MISSED: {bound}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
