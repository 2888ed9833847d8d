"""What AWS bills for a run: the requests the functions make, counted (DynamoDB read and write
request units computed from the items' sizes with AWS's rounding: moto's ConsumedCapacity is a
constant, so it cannot say; S3 requests by price class; SQS requests), and the rest of the bill
modelled from them and from what template.yaml deploys (``whole_bill``).

    python bench/billing.py                # both modes, 10 and 100 shards measured, 1000 from 100's
    python bench/billing.py --bundle-mb 10 # the bundle size the model states (default 10 MB)
    python bench/billing.py --quick        # 10 shards measured (make bench-smoke): exit 1 when a run of
                                           # parts bills more than a one-upload run

DynamoDB's rules (its developer guide, "Read/write capacity mode" and "Item sizes"):
- an item's size is its attribute names and values: a string's UTF-8 bytes, a number's
  significant digits halved plus one, a binary's bytes, a null or bool one byte, a list or map
  3 bytes plus one per element and its elements;
- a strongly consistent read is one unit per 4 KB (an eventual one half), a GetItem of an
  absent item the minimum; a Query sums the items it reads and rounds the total up, a
  BatchGetItem rounds each item; a projection reads the whole item all the same;
- a write is one unit per 1 KB of the item (the larger of its images: the image after it is
  taken here), a transaction's items twice that.
S3: PUT, COPY, POST and LIST requests (multipart parts and tagging among them) are one class,
GET and the rest another; DELETE is free.
"""

import argparse
import math
import sys
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

# us-east-1 list prices at the time of writing (on-demand DynamoDB; S3 Standard): an estimate
PRICES = {
    "dynamodb_read": 0.125e-6,
    "dynamodb_write": 0.625e-6,
    "s3_put": 0.005e-3,
    "s3_get": 0.0004e-3,
    "sqs": 0.40e-6,
}
S3_PUT_CLASS = {
    "PutObject",
    "CopyObject",
    "CreateMultipartUpload",
    "UploadPart",
    "UploadPartCopy",
    "CompleteMultipartUpload",
    "ListObjectsV2",
    "ListObjects",
    "ListObjectVersions",
    "ListMultipartUploads",
    "PutObjectTagging",
}
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}


def value_size(value: dict) -> int:
    """The bytes DynamoDB counts for one attribute value (its wire form: ``{"S": "..."}``)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = str(Decimal(inner)).lstrip("-").replace(".", "").strip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(inner)
    if kind in ("NULL", "BOOL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(value_size({"N": n}) for n in inner)
    if kind == "BS":
        return sum(len(b) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    raise ValueError(f"no size for a DynamoDB value of kind {kind}")


def item_size(item: dict) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def read_units(size: int, consistent: bool) -> float:
    return max(1, math.ceil(size / 4096)) * (1 if consistent else 0.5)


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


class BilledUnits:
    """Counts the billed units of every request the given clients make (hooked on botocore's
    events); ``reader``, a client of the same table that is not counted, reads an item whole
    where a request's answer does not hold it (a projection, a write's image after)."""

    def __init__(self, clients: dict[str, list], reader) -> None:
        self.units: Counter = Counter()
        self.reader = reader
        for service, made in clients.items():
            for one in made:
                one.meta.events.register(f"before-parameter-build.{service}", self._keep)
                one.meta.events.register(f"after-call.{service}", self._count)

    def snapshot(self) -> Counter:
        return Counter(self.units)

    @staticmethod
    def dollars(units: Counter) -> float:
        return (
            units["dynamodb_read"] * PRICES["dynamodb_read"]
            + units["dynamodb_write"] * PRICES["dynamodb_write"]
            + units["s3_put"] * PRICES["s3_put"]
            + units["s3_get"] * PRICES["s3_get"]
            + units["sqs"] * PRICES["sqs"]
        )

    @staticmethod
    def _keep(params, context, **_):
        context["billed_params"] = params

    def _count(self, http_response, parsed, model, context, **_):
        if http_response.status_code >= 300:
            return  # refused or failed: what it may have consumed is not modelled
        service, params = model.service_model.service_name, context.get("billed_params") or {}
        if service == "s3":
            if model.name not in S3_FREE:
                self.units["s3_put" if model.name in S3_PUT_CLASS else "s3_get"] += 1
        elif service == "sqs":
            self.units["sqs"] += 1
        elif service == "dynamodb":
            reads, writes = self._dynamodb(model.name, params, parsed)
            self.units["dynamodb_read"] += reads
            self.units["dynamodb_write"] += writes

    def _dynamodb(self, operation: str, params: dict, parsed: dict) -> tuple[float, float]:
        """The read and write units a call costs (DescribeTable and the like: none, not billed per request)."""
        if operation in ("GetItem", "Query", "BatchGetItem"):
            return self._read_units(operation, params, parsed), 0
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"):
            return 0, self._write_units(operation, params)
        return 0, 0

    def _read_units(self, operation: str, params: dict, parsed: dict) -> float:
        consistent = bool(params.get("ConsistentRead"))
        if operation == "GetItem":
            item = parsed.get("Item")
            if item is not None and params.get("ProjectionExpression"):
                item = self._whole(params["TableName"], params["Key"])
            return read_units(item_size(item) if item else 0, consistent)
        if operation == "Query":
            items = parsed.get("Items") or []
            if params.get("ProjectionExpression"):  # the same page again, whole
                items = self.reader.query(**_unprojected(params)).get("Items") or []
            return read_units(sum(item_size(i) for i in items), consistent)
        units = 0.0
        for table, asked in params["RequestItems"].items():  # BatchGetItem
            found = parsed.get("Responses", {}).get(table, [])
            strong = bool(asked.get("ConsistentRead"))
            if asked.get("ProjectionExpression"):
                found = [item for key in asked["Keys"] if (item := self._whole(table, key))]
            units += sum(read_units(item_size(i), strong) for i in found)
            units += (len(asked["Keys"]) - len(found)) * read_units(0, strong)  # absent: the minimum
        return units

    def _write_units(self, operation: str, params: dict) -> float:
        if operation == "PutItem":
            return write_units(item_size(params["Item"]))
        if operation in ("UpdateItem", "DeleteItem"):
            after = self._whole(params["TableName"], params["Key"])
            return write_units(item_size(after) if after else 0)
        if operation == "TransactWriteItems":
            units = 0
            for entry in params["TransactItems"]:
                ((kind, request),) = entry.items()
                if kind == "Put":
                    size = item_size(request["Item"])
                else:
                    after = self._whole(request["TableName"], request["Key"])
                    size = item_size(after) if after else 0
                units += 2 * write_units(size)
            return units
        return sum(  # BatchWriteItem
            write_units(item_size(r["PutRequest"]["Item"])) if "PutRequest" in r else 1
            for rows in params["RequestItems"].values()
            for r in rows
        )

    def _whole(self, table: str, key: dict) -> dict | None:
        return self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


def _unprojected(params: dict) -> dict:
    """A Query's parameters without its projection (and the names only it used)."""
    kept = {k: v for k, v in params.items() if k != "ProjectionExpression"}
    used = " ".join(kept.get(k, "") for k in ("KeyConditionExpression", "FilterExpression"))
    names = {k: v for k, v in (kept.pop("ExpressionAttributeNames", None) or {}).items() if k in used}
    return {**kept, **({"ExpressionAttributeNames": names} if names else {})}


# The rest of the bill: us-east-1 list prices at the time of writing (an estimate; check current ones)
LAMBDA_GB_SECOND = 0.0000133334  # arm64
LAMBDA_REQUEST = 0.20e-6
HTTP_API_REQUEST = 1.00e-6
S3_GB_MONTH = 0.023  # S3 Standard
TRANSFER_GB = {"in-region": 0.0, "cross-region": 0.02, "internet": 0.09}
XRAY_TRACE = 5.00e-6  # a trace recorded
LOGS_GB = 0.50  # CloudWatch Logs, ingested
ALARM_METRIC_MONTH, KMS_KEY_MONTH, CUSTOM_METRIC_MONTH = 0.10, 1.00, 0.30
IDLE_POLLS_MONTH = 5 * 30 * 86400 / 20  # an SQS event source: 5 long polls of 20 s at once, all month
GB, MIB = 1e9, 1 << 20


@dataclass(frozen=True)
class Model:
    """What the bill assumes beyond the requests counted: each function's time per item (from
    ``bench/scale.py``'s modelled rates), the memory and retention template.yaml deploys."""

    api_gb: float = 0.5  # the API function's memory, GB
    api_seconds: float = 0.1  # a grant, an open, a close
    arrivals_gb: float = 1.769
    arrival_seconds: float = 0.2  # an arrival's own time, beside its bundle's pass
    parts_mib_s: float = 28.5  # an arrival's pass in parts (validate), modelled for Lambda by bench/scale.py
    merged_mib_s: float = 10.3  # in one-upload (validate and normalize)
    finalizer_gb: float = 2.048
    send_seconds: float = 0.3  # a send's own time, beside its bytes
    transfer_mib_s: float = 80  # to S3 and to the upstream
    splice_mib_s: float = 114  # a part spliced from normalized copies (bench/scale.py, a half core)
    retention_days: int = 30  # BundleRetentionDays: results, reports, plans, a one-upload run's bundles
    noncurrent_days: int = 15  # a version made noncurrent is kept this long more
    parts_bundle_days: int = 3  # PartsBundleRetentionDays (2), then a day as a noncurrent version
    result_bytes: int = 4096  # a shard's results object
    report_bytes: int = 20_000  # one published report version (a summary, whatever the run's size)
    messages_a_batch: int = 1  # an event source's batch (ReceiveMessage, DeleteMessageBatch): uploads trickle in
    traced: float = 1.0  # of the invocations, the share X-Ray records (Tracing: Active): all, at most
    log_bytes: int = 2048  # an invocation's log: Lambda's START/END/REPORT lines and our JSON lines


ASSUMED = {  # what whole_bill assumes beyond the requests counted, as the bench prints it
    "api_seconds": "the API: 0.1 s a request at 512 MB",
    "arrival_seconds": "an arrival: 0.2 s plus its bundle at 28.5 MiB/s (parts) or 10.3 MiB/s (one-upload), 1769 MB",
    "send_seconds": "the finalizer, 2048 MB: 0.3 s a send plus its bytes at 80 MiB/s; one-upload's splice 114 MiB/s",
    "messages_a_batch": "an event source receives and deletes each message in a batch of its own (an upper bound)",
    "traced": "X-Ray records every invocation (the default rule records one a second and 5% more: an upper bound)",
    "log_bytes": "2 KB of logs an invocation (Lambda's own lines and ours)",
    "retention_days": "results and reports 30 days + 15 noncurrent; parts' bundles 3 in all, one-upload's 45",
}


def whole_bill(mode: str, shards: int, bundle_bytes: int, requests: float, model: Model = Model()) -> dict:
    """One run's bill in dollars, line by line: ``requests`` (counted: DynamoDB, S3, SQS), Lambda,
    the API, S3 storage over the retention and transfer out, for ``shards`` bundles of
    ``bundle_bytes``; ``mode``: parts or one-upload."""
    parts, mib = mode == "parts", bundle_bytes / MIB
    bundles_gb = shards * bundle_bytes / GB
    invocations = {"api": shards + 2, "arrivals": shards, "finalizer": shards + 1 if parts else 2}
    seconds = {
        "api": invocations["api"] * model.api_seconds * model.api_gb,
        "arrivals": shards
        * (model.arrival_seconds + mib / (model.parts_mib_s if parts else model.merged_mib_s))
        * model.arrivals_gb,
        "finalizer": (
            shards * (model.send_seconds + mib / model.transfer_mib_s)
            if parts
            else shards * mib / model.splice_mib_s + 3 * shards * mib / model.transfer_mib_s + 1
        )
        * model.finalizer_gb,
    }
    kept_days = model.retention_days + model.noncurrent_days
    bundle_days = model.parts_bundle_days if parts else kept_days
    kept = bundles_gb * (1 if parts else 2.15) * bundle_days  # one-upload: the normalized copies, their indexes
    kept += (shards * model.result_bytes + (shards + 2) * model.report_bytes) / GB * kept_days
    storage = kept / 30 * S3_GB_MONTH
    if not parts:
        storage += bundles_gb / 30 * S3_GB_MONTH  # a merged part spooled a day
    # outside our functions: S3 sends each upload's event to the arrivals queue, and each queue's
    # event source receives and deletes every message (the finalizer's are counted as they are sent)
    received = invocations["arrivals"] + invocations["finalizer"]
    events = (shards + 2 * math.ceil(received / model.messages_a_batch)) * PRICES["sqs"]
    called = sum(invocations.values())
    lines = {
        "requests": requests,
        "events": events,
        "lambda": sum(seconds.values()) * LAMBDA_GB_SECOND + called * LAMBDA_REQUEST,
        "api": invocations["api"] * HTTP_API_REQUEST,
        "x-ray": called * model.traced * XRAY_TRACE,
        "logs": called * model.log_bytes / GB * LOGS_GB,
        "storage": storage,
    }
    transfer = {where: bundles_gb * price for where, price in TRANSFER_GB.items()}
    return {"lines": lines, "transfer": transfer, "gb_seconds": sum(seconds.values())}


def custom_metrics() -> set[str]:
    """The metrics the functions put (``domain/metric_names.py``, held to the code by its test): each a
    custom metric, billed a month."""
    from codspeed_aggregator.domain.metric_names import METRICS

    return set(METRICS)


def fixed_monthly(template: dict, custom: int) -> dict[str, float]:
    """What the stack costs a month whatever it runs: its alarms' metrics, its KMS key, the idle
    polling of its two queues' event sources, its ``custom`` metrics (one dimension set each)."""
    resources = template["Resources"].values()
    alarms = [r["Properties"] for r in resources if r["Type"] == "AWS::CloudWatch::Alarm"]
    metrics = sum(sum(1 for m in a["Metrics"] if "MetricStat" in m) if "Metrics" in a else 1 for a in alarms)
    keys = sum(1 for r in resources if r["Type"] == "AWS::KMS::Key")
    return {
        "alarm metrics": metrics * ALARM_METRIC_MONTH,
        "kms keys": keys * KMS_KEY_MONTH,
        "idle queue polling": 2 * IDLE_POLLS_MONTH * PRICES["sqs"],
        "custom metrics": custom * CUSTOM_METRIC_MONTH,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle-mb", type=float, default=10, help="each shard's bundle, MB (default 10)")
    parser.add_argument("--quick", action="store_true", help="10 shards measured, the rest from its figures")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "functions"), str(root), str(root / "local")]
    from growth import PARTS_PROJECT, PROJECT, both_modes, measure  # the local stack: imported to measure only
    from samtranslator.yaml_helper import yaml_parse

    measured = (10,) if args.quick else (10, 100)
    with both_modes() as (stack, counter, nbytes, billed):
        runs = {
            (mode, n): BilledUnits.dollars(measure(stack, counter, nbytes, n, 1, project, billed)["billed"])
            for mode, project in (("one-upload", PROJECT), ("parts", PARTS_PROJECT))
            for n in measured
        }
    bundle = int(args.bundle_mb * 1e6)
    print(f"a run's bill, {args.bundle_mb:g} MB a bundle (requests counted at {', '.join(map(str, measured))} shards):")
    names = ("requests", "events", "lambda", "api", "x-ray", "logs", "storage")
    print(
        "| mode, shards | "
        + " | ".join(names)
        + " | transfer: in-region / cross-region / internet | per run: in-region / internet | per upload, internet |"
    )
    print("|---" * (len(names) + 4) + "|")
    total = {}  # a 1000-shard run's, over the internet (CodSpeed's), by mode
    for mode in ("one-upload", "parts"):
        for shards in (10, 100, 1000):
            base = max(n for n in measured if n <= shards)
            bill = whole_bill(mode, shards, bundle, runs[(mode, base)] / base * shards)
            lines, transfer = bill["lines"], bill["transfer"]
            ours = sum(lines.values())
            cells = [f"${lines[n]:.4f}" for n in names]
            cells[0] += "" if shards in measured else " *"
            cells[2] += f" ({bill['gb_seconds']:.0f} GB-s)"
            cells += [
                " / ".join(f"${v:.2f}" for v in transfer.values()),
                f"${ours:.4f} / ${ours + transfer['internet']:.4f}",
                f"${(ours + transfer['internet']) / shards:.5f}",
            ]
            print(f"| {mode}, {shards} | " + " | ".join(cells) + " |")
        total[mode] = ours + transfer["internet"]
    print("(* from the largest run measured, per shard: flat per shard, bench/growth.py)")
    print("assumed: " + "; ".join(ASSUMED.values()))
    metrics = custom_metrics()
    fixed = fixed_monthly(yaml_parse((root / "template.yaml").read_text()), len(metrics))
    print("fixed, a month: " + ", ".join(f"{k} ${v:.2f}" for k, v in fixed.items()) + f"; ${sum(fixed.values()):.2f}")
    ratio = total["parts"] / total["one-upload"]
    print(f"billing: parts_1000={total['parts']:.4f} one_upload_1000={total['one-upload']:.4f} ratio={ratio:.2f}")
    return 1 if ratio > 1 else 0  # the default costs no more than a merge at the end


if __name__ == "__main__":
    sys.exit(main())
