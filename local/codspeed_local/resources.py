"""Create locally what template.yaml declares: the bucket (notifying the arrivals queue),
the table with its open-runs index, and the queues with their dead-letter queues."""

import json
from dataclasses import dataclass

from codspeed_aggregator.adapters.ledger.codec import OPEN_INDEX

MAX_RECEIVES = 3


@dataclass(frozen=True)
class Resources:
    bucket: str
    table: str
    arrivals_queue_url: str
    finalize_queue_url: str
    finalize_dlq_url: str
    arrivals_dlq_url: str


def create(s3, sqs, dynamodb, prefix: str = "codspeed", visibility_timeout: int = 5) -> Resources:
    bucket, table = f"{prefix}-bundles", f"{prefix}-runs"
    queues = {}
    for name in ("arrivals", "finalize"):
        dlq_url = sqs.create_queue(QueueName=f"{prefix}-{name}-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(
            QueueName=f"{prefix}-{name}",
            Attributes={
                "VisibilityTimeout": str(visibility_timeout),
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVES}),
            },
        )["QueueUrl"]
        queues[name] = (url, dlq_url)
    arrivals_arn = sqs.get_queue_attributes(QueueUrl=queues["arrivals"][0], AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": arrivals_arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "bundles/"}]}},
                }
            ]
        },
    )
    dynamodb.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "open_pk", "AttributeType": "S"},
            {"AttributeName": "deadline_at", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": OPEN_INDEX,
                "KeySchema": [
                    {"AttributeName": "open_pk", "KeyType": "HASH"},
                    {"AttributeName": "deadline_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["project", "run_id"]},
            }
        ],
    )
    return Resources(
        bucket, table, queues["arrivals"][0], queues["finalize"][0], queues["finalize"][1], queues["arrivals"][1]
    )
