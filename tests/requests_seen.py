"""What a client asked AWS meanwhile, seen through botocore's event hooks: to count the reads a
use case makes, not to model them."""

from contextlib import contextmanager


@contextmanager
def dynamodb_requests(db):
    """Each DynamoDB request made meanwhile: (operation, its parameters)."""
    seen = []

    def note(params, event_name, **_):
        seen.append((event_name.rsplit(".", 1)[1], params))

    db.meta.events.register("before-parameter-build.dynamodb", note, unique_id="requests-seen")
    try:
        yield seen
    finally:
        db.meta.events.unregister("before-parameter-build.dynamodb", unique_id="requests-seen")


@contextmanager
def s3_gets(s3, operation: str = "GetObject"):
    """The keys of each S3 GetObject (or ``operation``) made meanwhile."""
    seen = []

    def note(params, **_):
        return seen.append(params["Key"])

    s3.meta.events.register(f"before-parameter-build.s3.{operation}", note, unique_id="requests-seen")
    try:
        yield seen
    finally:
        s3.meta.events.unregister(f"before-parameter-build.s3.{operation}", unique_id="requests-seen")


def whole_run_reads(requests) -> int:
    """The Queries among ``requests`` that read a run whole (``Reads.snapshot``)."""
    return sum(1 for op, p in requests if op == "Query" and p["KeyConditionExpression"].endswith("sk < :uploads"))


def item_keys(requests, prefix: str = "SHARD#") -> list[str]:
    """The sort keys starting with ``prefix`` that BatchGetItems among ``requests`` asked for."""
    return sorted(
        sk
        for op, p in requests
        if op == "BatchGetItem"
        for k in next(iter(p["RequestItems"].values()))["Keys"]
        if (sk := k["sk"]["S"]).startswith(prefix)
    )
