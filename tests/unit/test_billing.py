"""bench/billing.py counts what AWS bills, by DynamoDB's documented sizes and rounding (moto's
ConsumedCapacity is a constant): held here on moto in-process, each figure worked out by hand."""

import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from billing import (  # noqa: E402 -- bench/ is put on the path first: a script's folder, not a package
    S3_GB_MONTH,
    BilledUnits,
    Model,
    custom_metrics,
    fixed_monthly,
    item_size,
    read_units,
    value_size,
    whole_bill,
    write_units,
)


def test_sizes_and_rounding_as_dynamodb_documents_them():
    assert value_size({"S": "héllo"}) == 6 and value_size({"N": "12345"}) == 4 and value_size({"N": "-0.0100"}) == 2
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    assert item_size({"pk": {"S": "a"}, "n": {"N": "7"}}) == (2 + 1) + (1 + 2)
    assert (read_units(4096, True), read_units(4097, True), read_units(0, True), read_units(100, False)) == (
        1,
        2,
        1,
        0.5,
    )
    assert (write_units(1024), write_units(1025), write_units(0)) == (1, 2, 1)


@pytest.fixture
def table():
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        db.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
        )
        counted = boto3.client("dynamodb", region_name="us-east-1")
        yield counted, BilledUnits({"dynamodb": [counted]}, db)


def _item(sk: str, filler: int) -> dict:
    return {"pk": {"S": "p"}, "sk": {"S": sk}, "f": {"S": "x" * filler}}


def test_each_request_is_billed_by_the_items_it_reads_and_writes(table):
    db, billed = table
    db.put_item(TableName="t", Item=_item("a", 1500))  # 2 + 1 + 2 + 1500 + 1 = 1506 bytes: 2 write units
    db.put_item(TableName="t", Item=_item("b", 5000))  # 5006 bytes: 5
    assert billed.units["dynamodb_write"] == 7
    db.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "b"}}, ConsistentRead=True)  # 5006: 2 units
    db.get_item(
        TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "b"}}, ProjectionExpression="pk"
    )  # whole, eventual: 1
    db.get_item(TableName="t", Key={"pk": {"S": "p"}, "sk": {"S": "none"}}, ConsistentRead=True)  # absent: 1
    assert billed.units["dynamodb_read"] == 4
    db.query(
        TableName="t",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "p"}},
        ConsistentRead=True,
        ProjectionExpression="sk",
    )  # 1506 + 5006 summed, whole: 2 units
    db.batch_get_item(
        RequestItems={
            "t": {"Keys": [{"pk": {"S": "p"}, "sk": {"S": s}} for s in ("a", "b", "none")], "ConsistentRead": True}
        }
    )  # 1 + 2, and the absent one's 1
    assert billed.units["dynamodb_read"] == 4 + 2 + 4
    db.transact_write_items(
        TransactItems=[  # each item twice: the update's image after (1506 + 4), the put's
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": {"S": "p"}, "sk": {"S": "a"}},
                    "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "1"}},
                }
            },
            {"Put": {"TableName": "t", "Item": _item("c", 10)}},
        ]
    )
    assert billed.units["dynamodb_write"] == 7 + 2 * 2 + 2 * 1
    assert BilledUnits.dollars(billed.units) == pytest.approx(10 * 0.125e-6 + 13 * 0.625e-6)


def test_the_whole_bill_keeps_a_run_of_parts_bundles_days_not_weeks_and_sends_each_once():
    model = Model()
    parts, merged = (whole_bill(mode, 1000, 10_000_000, 0.04) for mode in ("parts", "one-upload"))
    bundles_gb = 1000 * 10_000_000 / 1e9
    small = (1000 * model.result_bytes + 1002 * model.report_bytes) / 1e9 * 45 / 30 * S3_GB_MONTH
    assert parts["lines"]["storage"] == pytest.approx(bundles_gb * 3 / 30 * S3_GB_MONTH + small)
    spooled = bundles_gb / 30 * S3_GB_MONTH
    assert merged["lines"]["storage"] == pytest.approx(bundles_gb * 2.15 * 45 / 30 * S3_GB_MONTH + small + spooled)
    assert (
        parts["transfer"] == merged["transfer"] == pytest.approx({"in-region": 0, "cross-region": 0.2, "internet": 0.9})
    )
    assert parts["lines"]["api"] == merged["lines"]["api"] == pytest.approx(1002e-6)


def test_the_whole_bill_counts_what_every_upload_costs_outside_our_functions():
    """S3's event to the arrivals queue, the event sources' receives and deletes, X-Ray's traces and
    the logs, each per invocation: 1000 uploads of parts are 1000 API, 1000 arrival and 1001
    finalizer invocations."""
    parts = whole_bill("parts", 1000, 10_000_000, 0.0)["lines"]
    assert parts["events"] == pytest.approx((1000 + 2 * (1000 + 1001)) * 0.40e-6)
    called = 1002 + 1000 + 1001
    assert parts["x-ray"] == pytest.approx(called * 5e-6)
    assert parts["logs"] == pytest.approx(called * 2048 / 1e9 * 0.50)
    merged = whole_bill("one-upload", 1000, 10_000_000, 0.0)["lines"]
    assert merged["events"] == pytest.approx((1000 + 2 * (1000 + 2)) * 0.40e-6)
    batched = whole_bill("parts", 1000, 10_000_000, 0.0, Model(messages_a_batch=10))["lines"]
    assert batched["events"] == pytest.approx((1000 + 2 * 201) * 0.40e-6)


def test_every_metric_the_functions_put_is_a_custom_metric_of_the_monthly_bill():
    """Before: the bill found only ``metrics.add("…")`` literals, 13 of the 19 (not Arrival.metric's five,
    nor the sweeper's): $3.90 a month, not $5.70."""
    import ast

    from codspeed_aggregator.domain.arrival import Arrival

    functions = Path(__file__).resolve().parents[2] / "functions" / "codspeed_aggregator"
    put = {a.metric for a in Arrival}
    for path in functions.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                said = [a for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if called in ("add", "named") and said and said[0].value[:1].isupper():
                    put.add(said[0].value)
    assert custom_metrics() == put and len(put) == 19
    assert fixed_monthly({"Resources": {}}, 2)["custom metrics"] == pytest.approx(0.60)


def test_a_metric_not_in_the_list_is_refused_where_it_is_put():
    from codspeed_aggregator.adapters.metrics import NoMetrics

    NoMetrics().add("ShardsCounted", 1)
    with pytest.raises(ValueError, match="metric 'Unlisted' is not in domain/metric_names.py's METRICS"):
        NoMetrics().add("Unlisted", 1)


def test_the_fixed_monthly_lines_count_each_alarms_metrics_and_each_key():
    template = {
        "Resources": {
            "One": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "Errors"}},
            "Math": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {"Metrics": [{"MetricStat": {}}, {"MetricStat": {}}, {"Expression": "a+b"}]},
            },
            "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
        }
    }
    fixed = fixed_monthly(template, 0)
    assert fixed["alarm metrics"] == pytest.approx(0.30) and fixed["kms keys"] == 1.0
    assert fixed["idle queue polling"] == pytest.approx(2 * 5 * 30 * 86400 / 20 * 0.40e-6)
