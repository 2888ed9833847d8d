"""What a close costs while it waits, against what the run bills, at 10, 100 and 1000 shards.

Each run: its shards pushed as shard jobs push them (a grant through the API, then the PUT), every
arrival counted, in the default mode (``parts``); then one of two bad days, and the gate's close
(the CI run and attempt of its jobs, as ``codspeed-client close`` sends them):

- ``crashed``: one more job of the same CI run asked for its upload and died before its PUT. Its
  shard is missing at once: the close waits for nothing.
- ``late event``: the last shard's PUT was answered but its S3 event is still on its way when the
  close comes. The close waits; the event comes, the arrival is counted and asks the finalize again.

Every request the functions' clients send is billed as ``bench/billing.py`` bills it (DynamoDB
request units from the items' sizes, S3 requests by class, SQS requests), and the run's whole bill
is ``billing.whole_bill`` of those requests (events, Lambda, the API, X-Ray, logs, storage; no transfer) at
``bench/billing.py``'s bundle size, 10 MB (``--bundle-mb``): the requests are counted on small
bundles, which cost the close the same. Printed per size and case: the run's bill and its
requests alone, what the close's barrier cost (each of its looks' requests, and a finalizer
invocation for each look past the first), and that as a share of the run's bill (and of its
requests alone).

    python bench/close_cost.py           # 10, 100 and 1000 shards
    python bench/close_cost.py --quick   # 10 and 100 (make bench-smoke): exit 1 past the target
    python bench/close_cost.py --shards 1000  # one size

The last line reads ``close_cost: crashed_share_max=P late_share_max=P looks_max=N``; target: a crashed
job adds under 1% to the run's bill, and the barrier looks at most 3 times (the close, the arrival
it waits for, the claim's own check), however many shards the run has.
"""

import argparse
import os
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT), str(ROOT / "bench"), str(ROOT / "local")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # before the handlers make their loggers

from billing import LAMBDA_GB_SECOND, LAMBDA_REQUEST, BilledUnits, Model, whole_bill
from growth import billing

from codspeed_aggregator import wiring
from codspeed_aggregator.services.close_barrier import CloseBarrier
from codspeed_local.stack import LocalStack
from tests.factories import bundle, upload_request

PROJECT = "acme/close-cost"
CI_RUN = "9100000001"
TARGET_SHARE = 0.01
MOST_LOOKS = 3


def _grant(session: requests.Session, stack, run_id: str, shard: str, total: int) -> tuple[dict, bytes]:
    data = bundle(4242, [f"tests/test_{shard}.py::bench_{j}" for j in range(3)])
    request = upload_request(PROJECT, run_id, shard, data, total=total, ci_run=CI_RUN, ci_attempt=1)
    answer = session.post(f"{stack.api_url}/v1/uploads", json=request, timeout=30)
    answer.raise_for_status()
    return answer.json(), data


def drain(stack) -> None:
    """The finalize queue's messages handed to the finalizer until none is left (a delayed one aside)."""
    while stack.finalizer.poll_once():
        pass


def state(session: requests.Session, stack, run_id: str) -> str:
    return session.get(f"{stack.api_url}/v1/runs/{PROJECT}/{run_id}", timeout=30).json()["state"]


def one_run(stack, billed: BilledUnits, shards: int, case: str, bundle_bytes: int) -> dict:
    """A run of ``shards`` shards through its bad day; answers its bill and the barrier's share of it."""
    run_id = f"close-{case.split()[0]}-{shards}-{uuid.uuid4().hex[:6]}"
    session = requests.Session()
    session.headers["Authorization"] = stack.token
    arrivals = wiring.build(wiring.ARRIVALS, wiring.settings()).record_arrival
    began = billed.snapshot()
    sent = shards - 1 if case == "crashed" else shards  # the crashed job is one of the run's shards

    def pushed(shard: str) -> str:
        grant, data = _grant(session, stack, run_id, shard, shards)
        requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30).raise_for_status()
        return grant["key"]

    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(pushed, [str(i) for i in range(1, sent + 1)]))
    held = keys.pop() if case == "late event" else None  # its event still on its way
    for key in keys:
        assert arrivals.record(key) == "recorded", key
    if case == "crashed":
        _grant(session, stack, run_id, str(shards), shards)  # its job died before its PUT
    drain(stack)  # each shard upstream as its own part, as the finalizer's messages send it
    looks: list[Counter] = []
    passed = CloseBarrier.passed

    def counted(self, *args, **kwargs):
        before = billed.snapshot()
        try:
            return passed(self, *args, **kwargs)
        finally:
            looks.append(billed.snapshot() - before)

    CloseBarrier.passed = counted  # type: ignore[method-assign]  # each look counted, the stack's own barrier
    try:
        close = {"project": PROJECT, "run_id": run_id, "ci_run": CI_RUN, "ci_attempt": 1}
        session.post(f"{stack.api_url}/v1/runs/close", json=close, timeout=30).raise_for_status()
        drain(stack)
        if held is not None:
            assert state(session, stack, run_id) == "open"  # the close waits for the bundle in the bucket
            assert arrivals.record(held) == "recorded"  # its event comes: the arrival asks the finalize again
            drain(stack)
    finally:
        CloseBarrier.passed = passed  # type: ignore[method-assign]  # put back as it was
    assert state(session, stack, run_id) == "forwarded"
    requests_bill = BilledUnits.dollars(billed.snapshot() - began)
    whole = sum(whole_bill("parts", shards, bundle_bytes, requests_bill)["lines"].values())
    model = Model()
    invocation = LAMBDA_REQUEST + model.send_seconds * model.finalizer_gb * LAMBDA_GB_SECOND
    # each look past the close's own is a finalizer invocation of its own (the arrival's request)
    barrier_cost = sum(BilledUnits.dollars(units) for units in looks) + (len(looks) - 1) * invocation
    return {
        "shards": shards,
        "case": case,
        "bill": whole,
        "requests": requests_bill,
        "barrier": barrier_cost,
        "looks": len(looks),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 and 100 shards only")
    parser.add_argument("--shards", type=int, action="append", help="these sizes only (repeat)")
    parser.add_argument(
        "--bundle-mb", type=float, default=10, help="the bundle size the run's bill is modelled at (billing.py's)"
    )
    args = parser.parse_args()
    sizes = tuple(args.shards or ()) or ((10, 100) if args.quick else (10, 100, 1000))
    rows = []
    with LocalStack(pollers=False, webhook_secret="bench-secret", env={"FORWARD_MODE": "parts"}) as stack:
        billed = billing()
        for shards in sizes:
            for case in ("crashed", "late event"):
                began = time.perf_counter()
                rows.append(one_run(stack, billed, shards, case, int(args.bundle_mb * 1e6)))
                rows[-1]["seconds"] = time.perf_counter() - began
    print("| shards | case | the run's bill (its requests) | the close's barrier | share (of its requests) | looks |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        share, of_requests = row["barrier"] / row["bill"], row["barrier"] / row["requests"]
        print(
            f"| {row['shards']} | {row['case']} | ${row['bill']:.5f} (${row['requests']:.5f}) | ${row['barrier']:.6f} "
            f"| {share:.3%} ({of_requests:.3%}) | {row['looks']} |"
        )
    crashed = max(r["barrier"] / r["bill"] for r in rows if r["case"] == "crashed")
    late = max(r["barrier"] / r["bill"] for r in rows if r["case"] == "late event")
    looks = max(r["looks"] for r in rows)
    print(f"close_cost: crashed_share_max={crashed:.4f} late_share_max={late:.4f} looks_max={looks}")
    return 0 if crashed < TARGET_SHARE and looks <= MOST_LOOKS else 1


if __name__ == "__main__":
    sys.exit(main())
