"""The local stack's moto server (``codspeed_local.moto_server``): its connections kept open
between calls, its listing of object versions and its queries answer as moto does; a poller is woken
by its own queue only."""

import http.client
import io
import os
import uuid
from urllib.parse import urlsplit

import boto3
import pytest
import urllib3.connection
from botocore.config import Config
from botocore.exceptions import ClientError


def _client():
    path_style = Config(s3={"addressing_style": "path"})
    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=path_style)


@pytest.fixture
def s3(stack):
    return _client()


@pytest.fixture
def bucket(s3):
    name = f"moto-server-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def test_a_clients_calls_share_one_connection_and_are_answered_as_before(bucket, monkeypatch):
    opened = []
    new_conn = urllib3.connection.HTTPConnection._new_conn
    monkeypatch.setattr(urllib3.connection.HTTPConnection, "_new_conn", lambda self: opened.append(1) or new_conn(self))
    s3 = _client()
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x" * (i * 1000))
    assert s3.get_object(Bucket=bucket, Key="k3")["Body"].read() == b"x" * 3000
    assert s3.head_object(Bucket=bucket, Key="k4")["ContentLength"] == 4000  # HEAD: the length, and no body
    with pytest.raises(ClientError, match="NoSuchKey"):
        s3.get_object(Bucket=bucket, Key="missing")
    with pytest.raises(ClientError, match="404"):
        s3.head_object(Bucket=bucket, Key="missing")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [f"k{i}" for i in range(5)]
    assert len(opened) == 1  # 10 calls; each opened its own connection before


def test_a_body_of_unknown_length_is_answered_and_its_connection_closed(s3, bucket):
    endpoint = urlsplit(os.environ["AWS_ENDPOINT_URL"])
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port, timeout=10)
    connection.request("PUT", f"/{bucket}/chunked", body=iter([b"abc", b"def"]), encode_chunked=True)
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200 and answer.getheader("Connection") == "close"
    assert s3.get_object(Bucket=bucket, Key="chunked")["Body"].read() == b"abcdef"


def test_what_moto_leaves_of_a_body_is_read_and_the_next_requests_bytes_never_are():
    from codspeed_local.moto_server import KnownLengthBody

    wire = io.BytesIO(b"0123456789" + b"GET /next HTTP/1.1\r\n")
    environ = {"CONTENT_LENGTH": "10", "wsgi.input": wire}
    body = KnownLengthBody.around(environ)
    assert environ["wsgi.input"] is body and body.read(3) == b"012" and body.readline() == b"3456789"
    assert body.read() == b"" and body.drained() and wire.read() == b"GET /next HTTP/1.1\r\n"
    unread = KnownLengthBody.around({"CONTENT_LENGTH": "10", "wsgi.input": io.BytesIO(b"0123456789next")})
    assert unread.drained() and unread.read() == b""
    cut = KnownLengthBody.around({"CONTENT_LENGTH": "10", "wsgi.input": io.BytesIO(b"01234")})
    assert not cut.drained()  # the client sent less than it said: the connection is closed after it
    assert KnownLengthBody.around({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": wire}) is None
    assert KnownLengthBody.around({"CONTENT_LENGTH": "ten", "wsgi.input": wire}) is None


def test_versions_listed_under_a_prefix_are_moto_s_own_listing_of_them(s3, bucket):
    for key in ("a/1", "a/1", "a/2", "b/1", "ab"):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    s3.delete_object(Bucket=bucket, Key="a/2")
    everything = s3.list_object_versions(Bucket=bucket)
    under = s3.list_object_versions(Bucket=bucket, Prefix="a/")

    def shown(listing, kind):
        return [(v["Key"], v["VersionId"], v["IsLatest"]) for v in listing.get(kind, [])]

    for kind in ("Versions", "DeleteMarkers"):
        assert shown(under, kind) == [v for v in shown(everything, kind) if v[0].startswith("a/")]
    assert [(k, latest) for k, _, latest in shown(under, "Versions")] == [
        ("a/1", True),
        ("a/1", False),
        ("a/2", False),
    ]
    assert shown(under, "DeleteMarkers")[0][::2] == ("a/2", True)


def _keyed_table() -> tuple:
    """A DynamoDB client of the stack's moto, and a new table keyed as the ledger's (pk, sk)."""
    db = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    table = f"moto-server-{uuid.uuid4().hex[:12]}"
    db.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk")],
        BillingMode="PAY_PER_REQUEST",
    )
    return db, table


QUERIES = {  # a run's reads: its record and tallies, a snapshot before its uploads, one shard; paged, reversed
    "between": {"KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b", "Values": {":a": "RUN", ":b": "TALLY#~"}},
    "before": {"KeyConditionExpression": "pk = :p AND sk < :a", "Values": {":a": "UPLOAD#"}},
    "begins_with, reversed": {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :a)",
        "Values": {":a": "SHARD#"},
        "ScanIndexForward": False,
    },
    "filtered, projected": {
        "KeyConditionExpression": "pk = :p",
        "Values": {":a": "arrived"},
        "FilterExpression": "#state = :a",
        "ProjectionExpression": "sk, #state, nested.deep",
        "ExpressionAttributeNames": {"#state": "state"},
    },
    "pages of two": {"KeyConditionExpression": "pk = :p AND sk > :a", "Values": {":a": "A"}, "Limit": 2},
}


def _query_pages(db, table: str, query: dict) -> list[dict]:
    asked = {k: v for k, v in query.items() if k != "Values"}
    values = {":p": {"S": "run"}, **{k: {"S": v} for k, v in query["Values"].items()}}
    pages, start = [], {}
    while True:
        page = db.query(TableName=table, ConsistentRead=True, ExpressionAttributeValues=values, **asked, **start)
        page.pop("ResponseMetadata")
        pages.append(page)
        if "LastEvaluatedKey" not in page:
            return pages
        start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}


def test_a_query_of_a_tables_key_answers_as_moto_s_own_and_leaves_the_items_as_they_were(stack, monkeypatch):
    """The local stack sizes each item of a query once and does not copy its answer (``moto_dynamodb``)."""
    from moto.dynamodb.models.table import Table

    db, table = _keyed_table()
    sks = ["RUN", "TALLY#0", "TALLY#1", *(f"SHARD#{i}" for i in range(6)), "UPLOAD#1#u", "UPLOAD#2#u"]
    for pk in ("run", "other"):
        for i, sk in enumerate(sks):
            item = {"state": {"S": "arrived" if i % 2 else "open"}, "n": {"N": str(i)}, "names": {"SS": ["a", "b"]}}
            item["nested"] = {"M": {"deep": {"L": [{"N": "1.50"}, {"S": "é" * i}]}, "other": {"BOOL": True}}}
            db.put_item(TableName=table, Item={"pk": {"S": pk}, "sk": {"S": sk}, **item})
    every = db.scan(TableName=table)["Items"]

    answered = {name: _query_pages(db, table, query) for name, query in QUERIES.items()}
    assert [len(pages) for pages in answered.values()] == [1, 1, 1, 1, 6]
    assert db.scan(TableName=table)["Items"] == every
    monkeypatch.setattr(Table, "query", Table.query.moto_own)
    assert {name: _query_pages(db, table, query) for name, query in QUERIES.items()} == answered


def test_every_dynamodb_answer_written_as_json_reads_as_moto_s_own_serialization_of_it(stack, monkeypatch):
    from botocore.parsers import create_parser
    from moto.dynamodb.responses import DynamoResult

    from codspeed_local.moto_dynamodb import plain_json

    as_json, compared = DynamoResult.execute_result, []

    def both(self, context):
        answer = as_json(self, context)
        own = as_json.moto_serializer(self, context)
        shape = context.operation_model.output_shape

        def read(body):
            data = body.encode() if isinstance(body, str) else body
            return create_parser("json").parse({"body": data, "headers": {}, "status_code": 200}, shape)

        assert answer[0] == own[0] and answer[1]["Content-Type"] == own[1]["Content-Type"]
        assert read(answer[2]) == read(own[2]), context.operation_model.name
        compared.append((context.operation_model.name, plain_json(self.result) is not None))
        return answer

    monkeypatch.setattr(DynamoResult, "execute_result", both)
    db, table = _keyed_table()
    every_type = {
        "s": {"S": "é"},
        "n": {"N": "1.50"},
        "yes": {"BOOL": True},
        "nothing": {"NULL": True},
        "names": {"SS": ["a", "b"]},
        "numbers": {"NS": ["1", "2"]},
        "list": {"L": [{"S": "x"}, {"M": {"deep": {"N": "3"}}}]},
    }
    for i in range(5):
        db.put_item(TableName=table, Item={"pk": {"S": "p"}, "sk": {"S": f"{i}"}, **every_type})
    db.put_item(TableName=table, Item={"pk": {"S": "b"}, "sk": {"S": "0"}, "bytes": {"B": b"\x00\xff"}})
    updated = db.update_item(
        TableName=table,
        Key={"pk": {"S": "p"}, "sk": {"S": "0"}},
        UpdateExpression="ADD c :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="ALL_NEW",
        ReturnConsumedCapacity="TOTAL",
    )
    assert updated["Attributes"]["c"] == {"N": "1"} and updated["ConsumedCapacity"]["TableName"] == table
    page = db.query(
        TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}}, Limit=2
    )
    assert page["Count"] == 2 and page["LastEvaluatedKey"] == {"pk": {"S": "p"}, "sk": {"S": "1"}}
    assert db.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "4"}})["Item"]["list"] == every_type["list"]
    assert "Item" not in db.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "9"}})
    assert db.get_item(TableName=table, Key={"pk": {"S": "b"}, "sk": {"S": "0"}})["Item"]["bytes"] == {"B": b"\x00\xff"}
    got = db.batch_get_item(RequestItems={table: {"Keys": [{"pk": {"S": "p"}, "sk": {"S": f"{i}"}} for i in range(3)]}})
    assert len(got["Responses"][table]) == 3
    db.transact_write_items(
        TransactItems=[{"Delete": {"TableName": table, "Key": {"pk": {"S": "p"}, "sk": {"S": "4"}}}}]
    )
    assert db.scan(TableName=table)["Count"] == 5
    assert db.describe_table(TableName=table)["Table"]["CreationDateTime"]  # a date: moto's serializer writes it
    written = {name for name, plain in compared if plain}
    assert {"PutItem", "UpdateItem", "Query", "GetItem", "BatchGetItem"} <= written
    assert {"DescribeTable", "GetItem", "Scan"} <= {name for name, plain in compared if not plain}  # a date, bytes


def test_a_queues_poller_is_woken_by_a_message_in_its_queue_and_by_nothing_else(stack):
    """Before: every S3 write and every SQS send woke both of the stack's pollers, each of them then
    polling its queue for nothing (a quarter of the suite's AWS calls)."""
    from codspeed_local.moto_server import woken_by
    from codspeed_local.resources import create

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    s3, sqs, db = (boto3.client(name, endpoint_url=endpoint) for name in ("s3", "sqs", "dynamodb"))
    made = create(s3, sqs, db, prefix=f"wake-{uuid.uuid4().hex[:8]}")
    arrivals, finalize = woken_by(made.arrivals_queue_url), woken_by(made.finalize_queue_url)
    woken = lambda: (arrivals.is_set(), finalize.is_set())  # noqa: E731 -- read after each step, then cleared

    s3.put_object(Bucket=made.bucket, Key="reports/acme/run.json", Body=b"{}")  # outside the notified prefix
    sqs.send_message(QueueUrl=made.arrivals_dlq_url, MessageBody="elsewhere")  # another queue
    assert woken() == (False, False)
    s3.put_object(Bucket=made.bucket, Key="bundles/acme/run/1/u.tar.gz", Body=b"x")  # S3's event, to arrivals
    assert woken() == (True, False)
    arrivals.clear()
    sqs.send_message(QueueUrl=made.finalize_queue_url, MessageBody="finalize")
    assert woken() == (False, True)
    finalize.clear()
    [message] = sqs.receive_message(QueueUrl=made.finalize_queue_url)["Messages"]
    assert woken() == (False, False)
    sqs.change_message_visibility(
        QueueUrl=made.finalize_queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )  # handed back: there again at once
    assert woken() == (False, True)


def test_on_a_moto_whose_sqs_names_its_methods_otherwise_the_wakeups_wrap_nothing_and_raise_nothing(monkeypatch):
    """Before: the stack failed to start, AttributeError (its pollers then poll once a second)."""
    from codspeed_local import moto_server

    class RenamedSQSBackend:
        def send(self, queue_name: str, message_body: str) -> None: ...

    monkeypatch.setattr("moto.sqs.models.SQSBackend", RenamedSQSBackend)
    moto_server._wake_on_queueing()
    assert sorted(n for n in vars(RenamedSQSBackend) if not n.startswith("__")) == ["send"]
