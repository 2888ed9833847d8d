"""The local stack's moto refuses as DynamoDB refuses (``codspeed_local.moto_fidelity``): an UpdateItem
refused changes nothing of the item, as on AWS, whatever the speed shortcuts."""

import os
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError


@pytest.fixture(scope="module")
def table(stack):
    db = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    name = f"moto-fidelity-{uuid.uuid4().hex[:12]}"
    db.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return db, name


def _item(db, name, key) -> dict | None:
    return db.get_item(TableName=name, Key=key, ConsistentRead=True).get("Item")


@pytest.mark.parametrize("existing", [True, False], ids=["an item", "no item yet"])
def test_an_update_refused_for_its_size_changes_nothing(table, existing):
    """moto applied the ``SET state`` of an update it refused for size and dropped only the oversized
    value: a run read ``forwarded`` locally where DynamoDB leaves it ``finalizing``."""
    db, name = table
    key = {"pk": {"S": f"run-{uuid.uuid4().hex}"}, "sk": {"S": "RUN"}}
    if existing:
        db.put_item(TableName=name, Item={**key, "state": {"S": "finalizing"}, "big": {"S": "x" * 300_000}})
    before = _item(db, name, key)
    with pytest.raises(ClientError) as refused:
        db.update_item(
            TableName=name,
            Key=key,
            UpdateExpression="SET #state = :s, upstream = :big",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":s": {"S": "forwarded"},
                ":big": {"S": "y" * (150_000 if existing else 450_000)},
            },
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "Item size" in refused.value.response["Error"]["Message"]
    assert _item(db, name, key) == before  # all or nothing, as DynamoDB


def test_an_update_whose_condition_fails_or_whose_expression_is_invalid_changes_nothing(table):
    db, name = table
    key = {"pk": {"S": f"run-{uuid.uuid4().hex}"}, "sk": {"S": "RUN"}}
    db.put_item(TableName=name, Item={**key, "state": {"S": "open"}, "rev": {"N": "1"}})
    before = _item(db, name, key)
    for kwargs in (
        {"UpdateExpression": "SET a = :a ADD rev :one", "ConditionExpression": "rev = :ten"},
        {"UpdateExpression": "SET a = :a ADD rev :one, a :one"},  # one path twice: invalid
    ):
        values = {":a": {"S": "x"}, ":one": {"N": "1"}, ":ten": {"N": "10"}}
        used = {k: v for k, v in values.items() if k in str(kwargs)}
        with pytest.raises(ClientError):
            db.update_item(TableName=name, Key=key, ExpressionAttributeValues=used, **kwargs)
        assert _item(db, name, key) == before


MOTO_ALONE = """
import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

with mock_aws():
    db = boto3.client("dynamodb", region_name="us-east-1")
    db.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    db.put_item(TableName="t", Item={"pk": {"S": "k"}, "state": {"S": "finalizing"}})
    try:
        db.update_item(
            TableName="t",
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET #s = :s, big = :big",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues={":s": {"S": "forwarded"}, ":big": {"S": "x" * 410_000}},
        )
    except ClientError as exc:
        print(exc.response["Error"]["Code"], db.get_item(TableName="t", Key={"pk": {"S": "k"}})["Item"]["state"]["S"])
"""


def test_moto_itself_still_keeps_part_of_an_update_it_refuses_for_its_size():
    """The day this fails, moto applies an update all or nothing as DynamoDB does, and moto_fidelity's patch
    can go. moto as it ships, in a process of its own (its in-process mock would catch this worker's stack)."""
    import subprocess
    import sys

    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    env.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run([sys.executable, "-c", MOTO_ALONE], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ValidationException", "forwarded"]  # refused, and half of it kept
