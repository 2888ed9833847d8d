"""What AWS bills for the requests the functions make: DynamoDB read and write request units
computed from the items' sizes with AWS's rounding (moto's ConsumedCapacity is a constant, so
it cannot say), S3 requests by price class, SQS requests; and their price.

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

import math
from collections import Counter
from decimal import Decimal

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
