"""The local stack's IAM: a policy evaluated as AWS evaluates identity policies, and each call
mapped to the actions AWS's service authorization reference documents for it."""

import pytest

from codspeed_local.iam import ALLOWED, DENIED, NOT_ALLOWED, Need, Policy, Unmapped, needs
from codspeed_local.iam.policy import UnsupportedCondition

BUCKET = "arn:aws:s3:::b"


def _allow(action, resource, condition=None):
    return {
        "Effect": "Allow",
        "Action": action,
        "Resource": resource,
        **({"Condition": condition} if condition else {}),
    }


def test_actions_and_resources_match_with_iams_wildcards_and_nothing_else():
    policy = Policy(
        [_allow(["s3:Get*"], f"{BUCKET}/reports/*"), _allow("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q?")]
    )
    assert policy.decide(Need("s3:GetObject", f"{BUCKET}/reports/a/b/v1.json")) == ALLOWED
    assert policy.decide(Need("S3:getobject", f"{BUCKET}/reports/x")) == ALLOWED  # actions ignore case
    assert policy.decide(Need("s3:GetObject", f"{BUCKET}/Reports/x")) == NOT_ALLOWED  # resources do not
    assert policy.decide(Need("s3:PutObject", f"{BUCKET}/reports/x")) == NOT_ALLOWED
    assert policy.decide(Need("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q1")) == ALLOWED
    assert policy.decide(Need("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q12")) == NOT_ALLOWED
    assert (
        Policy([_allow("s3:GetObject", f"{BUCKET}/a[b]/*")]).decide(Need("s3:GetObject", f"{BUCKET}/ab/x"))
        == NOT_ALLOWED
    )


def test_an_explicit_deny_wins_over_any_allow():
    policy = Policy([_allow("s3:*", f"{BUCKET}/*"), {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"}])
    assert policy.decide(Need("s3:DeleteObject", f"{BUCKET}/x")) == DENIED
    assert policy.decide(Need("s3:GetObject", f"{BUCKET}/x")) == ALLOWED


def test_a_listing_is_allowed_only_under_the_prefixes_its_condition_names():
    policy = Policy([_allow("s3:ListBucket", BUCKET, {"StringLike": {"s3:prefix": ["bundles/*", "reports/*"]}})])
    assert policy.decide(Need("s3:ListBucket", BUCKET, {"s3:prefix": "reports/acme/w/run/v"})) == ALLOWED
    assert policy.decide(Need("s3:ListBucket", BUCKET, {"s3:prefix": "spool/acme"})) == NOT_ALLOWED
    assert policy.decide(Need("s3:ListBucket", BUCKET)) == NOT_ALLOWED  # no prefix: the key is absent, no match


@pytest.mark.parametrize(
    "operator, present, absent",
    [
        ("StringEquals", True, False),
        ("StringNotEquals", False, True),
        ("StringEqualsIfExists", True, True),
        ("StringLike", True, False),
        ("StringNotLike", False, True),
        ("ArnLike", True, False),
    ],
)
def test_condition_operators_match_as_aws_documents_including_absent_keys(operator, present, absent):
    policy = Policy([_allow("kms:Decrypt", "*", {operator: {"kms:ViaService": "ssm.us-east-1.amazonaws.com"}})])
    holds = policy.decide(Need("kms:Decrypt", "k", {"kms:ViaService": "ssm.us-east-1.amazonaws.com"})) == ALLOWED
    assert holds is present
    assert (policy.decide(Need("kms:Decrypt", "k")) == ALLOWED) is absent


def test_null_and_bool_conditions():
    null = Policy([_allow("s3:PutObject", "*", {"Null": {"s3:x-amz-server-side-encryption": "true"}})])
    assert null.decide(Need("s3:PutObject", "o")) == ALLOWED
    assert null.decide(Need("s3:PutObject", "o", {"s3:x-amz-server-side-encryption": "aws:kms"})) == NOT_ALLOWED
    tls = Policy([_allow("s3:GetObject", "*", {"Bool": {"aws:SecureTransport": "true"}})])
    assert tls.decide(Need("s3:GetObject", "o", {"aws:SecureTransport": "true"})) == ALLOWED
    assert tls.decide(Need("s3:GetObject", "o", {"aws:SecureTransport": "false"})) == NOT_ALLOWED


def test_what_this_evaluator_does_not_know_is_refused_not_guessed():
    with pytest.raises(UnsupportedCondition, match="ForAnyValue:StringLike on aws:TagKeys"):
        Policy([_allow("s3:GetObject", "*", {"ForAnyValue:StringLike": {"aws:TagKeys": "a*"}})]).decide(
            Need("s3:GetObject", "o")
        )
    with pytest.raises(UnsupportedCondition, match="DateGreaterThan"):
        Policy([_allow("s3:GetObject", "*", {"DateGreaterThan": {"aws:CurrentTime": "2026"}})]).decide(
            Need("s3:GetObject", "o")
        )
    with pytest.raises(UnsupportedCondition, match="NotAction"):
        Policy([{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]).decide(Need("s3:GetObject", "o"))


def _actions(service, operation, params, key=None):
    return [(n.action, n.resource, n.context) for n in needs(service, operation, params, "us-east-1", "123", key)]


def test_an_object_read_at_a_version_needs_get_object_version():
    assert _actions("s3", "GetObject", {"Bucket": "b", "Key": "spool/a.tar.gz"}) == [
        ("s3:GetObject", f"{BUCKET}/spool/a.tar.gz", {})
    ]
    assert _actions("s3", "GetObject", {"Bucket": "b", "Key": "k", "VersionId": "v"}) == [
        ("s3:GetObjectVersion", f"{BUCKET}/k", {})
    ]
    assert _actions("s3", "HeadObject", {"Bucket": "b", "Key": "k", "VersionId": "v"})[0][0] == "s3:GetObjectVersion"
    assert (
        _actions("s3", "PutObjectTagging", {"Bucket": "b", "Key": "k", "VersionId": "v"})[0][0]
        == "s3:PutObjectVersionTagging"
    )


def test_multipart_uploads_are_put_object_and_a_tagged_put_also_needs_tagging():
    for op in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        assert _actions("s3", op, {"Bucket": "b", "Key": "k"}) == [("s3:PutObject", f"{BUCKET}/k", {})]
    assert [a for a, _, _ in _actions("s3", "PutObject", {"Bucket": "b", "Key": "k", "Tagging": "a=b"})] == [
        "s3:PutObject",
        "s3:PutObjectTagging",
    ]
    assert _actions("s3", "AbortMultipartUpload", {"Bucket": "b", "Key": "k"})[0][0] == "s3:AbortMultipartUpload"


def test_a_listing_is_list_bucket_on_the_bucket_with_its_prefix():
    assert _actions("s3", "ListObjectsV2", {"Bucket": "b", "Prefix": "reports/x/"}) == [
        ("s3:ListBucket", BUCKET, {"s3:prefix": "reports/x/"})
    ]
    assert _actions("s3", "ListObjectsV2", {"Bucket": "b"}) == [("s3:ListBucket", BUCKET, {})]


def test_a_transaction_needs_each_items_own_write():
    items = [{"Update": {"TableName": "t"}}, {"Put": {"TableName": "t"}}, {"ConditionCheck": {"TableName": "u"}}]
    assert [(a, r) for a, r, _ in _actions("dynamodb", "TransactWriteItems", {"TransactItems": items})] == [
        ("dynamodb:UpdateItem", "arn:aws:dynamodb:us-east-1:123:table/t"),
        ("dynamodb:PutItem", "arn:aws:dynamodb:us-east-1:123:table/t"),
        ("dynamodb:ConditionCheckItem", "arn:aws:dynamodb:us-east-1:123:table/u"),
    ]
    assert (
        _actions("dynamodb", "Query", {"TableName": "t", "IndexName": "open-runs"})[0][1]
        == "arn:aws:dynamodb:us-east-1:123:table/t/index/open-runs"
    )
    assert _actions("dynamodb", "BatchGetItem", {"RequestItems": {"t": {}}})[0][:2] == (
        "dynamodb:BatchGetItem",
        "arn:aws:dynamodb:us-east-1:123:table/t",
    )


def test_queue_calls_name_the_queue_arn_and_batches_their_single_action():
    url = "http://127.0.0.1:5000/123456789012/codspeed-finalize"
    assert _actions("sqs", "SendMessageBatch", {"QueueUrl": url}) == [
        ("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:codspeed-finalize", {})
    ]
    assert _actions("sqs", "ChangeMessageVisibility", {"QueueUrl": url})[0][0] == "sqs:ChangeMessageVisibility"


def test_a_secure_string_read_with_a_customer_key_also_needs_kms_decrypt_through_ssm():
    params = {"Name": "/codspeed-aggregator/api-token", "WithDecryption": True}
    assert _actions("ssm", "GetParameter", params) == [
        ("ssm:GetParameter", "arn:aws:ssm:us-east-1:123:parameter/codspeed-aggregator/api-token", {})
    ]
    assert _actions("ssm", "GetParameter", params, key="arn:aws:kms:us-east-1:123:key/k")[1] == (
        "kms:Decrypt",
        "arn:aws:kms:us-east-1:123:key/k",
        {"kms:ViaService": "ssm.us-east-1.amazonaws.com"},
    )


def test_a_call_with_no_mapping_is_refused_by_name():
    with pytest.raises(Unmapped, match=r"no IAM mapping for s3.UploadPartCopy: add it to codspeed_local.iam.calls"):
        needs("s3", "UploadPartCopy", {"Bucket": "b", "Key": "k"}, "us-east-1", "123")
    with pytest.raises(Unmapped, match="dynamodb.TransactGetItems"):
        needs("dynamodb", "TransactGetItems", {}, "us-east-1", "123")


def test_a_copy_is_a_write_where_it_goes_and_a_read_where_it_comes_from_at_the_version_it_names():
    versioned = needs(
        "s3",
        "CopyObject",
        {"Bucket": "b", "Key": "to/k", "CopySource": {"Bucket": "b", "Key": "from/k", "VersionId": "v1"}},
        "us-east-1",
        "1",
    )
    assert [(n.action, n.resource) for n in versioned] == [
        ("s3:PutObject", "arn:aws:s3:::b/to/k"),
        ("s3:GetObjectVersion", "arn:aws:s3:::b/from/k"),
    ]
    current = needs(
        "s3",
        "CopyObject",
        {"Bucket": "b", "Key": "to/k", "CopySource": {"Bucket": "b", "Key": "from/k"}},
        "us-east-1",
        "1",
    )
    assert [n.action for n in current] == ["s3:PutObject", "s3:GetObject"]
    written = needs(
        "s3",
        "CopyObject",
        {"Bucket": "b", "Key": "to/k", "CopySource": "b/from/a%252Fb.tar.gz?versionId=v1"},
        "us-east-1",
        "1",
    )  # as botocore has it when the call is checked: the key quoted, the version after
    assert [(n.action, n.resource) for n in written][1] == ("s3:GetObjectVersion", "arn:aws:s3:::b/from/a%2Fb.tar.gz")


def test_a_wildcard_and_a_like_condition_hold_the_whole_value_a_trailing_newline_included():
    policy = Policy([_allow("s3:ListBucket", BUCKET, {"StringLike": {"s3:prefix": ["bundles/*", "reports"]}})])
    assert policy.decide(Need("s3:ListBucket", BUCKET, {"s3:prefix": "reports"})) == ALLOWED
    assert policy.decide(Need("s3:ListBucket", BUCKET, {"s3:prefix": "reports\n"})) == NOT_ALLOWED  # no false allow
    assert policy.decide(Need("s3:ListBucket", BUCKET, {"s3:prefix": "bundles/a\nb"})) == ALLOWED  # '*' spans lines
    assert Policy([_allow("s3:GetObject", f"{BUCKET}/k")]).decide(Need("s3:GetObject", f"{BUCKET}/k\n")) == NOT_ALLOWED


def test_condition_key_names_ignore_case_as_iams_do():
    policy = Policy([_allow("kms:Decrypt", "*", {"StringEquals": {"KMS:viaservice": "ssm.us-east-1.amazonaws.com"}})])
    assert policy.decide(Need("kms:Decrypt", "k", {"kms:ViaService": "ssm.us-east-1.amazonaws.com"})) == ALLOWED
    null = Policy([_allow("s3:PutObject", "*", {"Null": {"S3:X-Amz-Server-Side-Encryption": "true"}})])
    assert null.decide(Need("s3:PutObject", "o", {"s3:x-amz-server-side-encryption": "aws:kms"})) == NOT_ALLOWED


def test_a_parameter_read_at_a_version_or_label_is_authorized_on_the_parameter():
    for name in ("/codspeed-aggregator/api-token:3", "/codspeed-aggregator/api-token:live"):
        assert _actions("ssm", "GetParameter", {"Name": name}) == [
            ("ssm:GetParameter", "arn:aws:ssm:us-east-1:123:parameter/codspeed-aggregator/api-token", {})
        ]


def test_a_tagged_copy_also_needs_tagging_where_it_goes():
    tagged = needs(
        "s3",
        "CopyObject",
        {
            "Bucket": "b",
            "Key": "to/k",
            "CopySource": {"Bucket": "b", "Key": "from/k"},
            "TaggingDirective": "REPLACE",
            "Tagging": "run-final=true",
        },
        "us-east-1",
        "1",
    )
    assert [(n.action, n.resource) for n in tagged][2] == ("s3:PutObjectTagging", "arn:aws:s3:::b/to/k")
    untagged = needs(
        "s3",
        "CopyObject",
        {"Bucket": "b", "Key": "to/k", "CopySource": {"Bucket": "b", "Key": "from/k"}, "TaggingDirective": "REPLACE"},
        "us-east-1",
        "1",
    )
    assert [n.action for n in untagged] == ["s3:PutObject", "s3:GetObject"]  # an empty tag set: nothing tagged


def test_a_message_move_is_authorized_on_the_queue_messages_move_from_and_what_is_unmapped_says_so():
    """SQS's redrive needs, beside its own action, ReceiveMessage, DeleteMessage and GetQueueAttributes
    on the source and SendMessage on the destination (it was mapped to its own action alone)."""
    source, destination = (
        "arn:aws:sqs:us-east-1:123:codspeed-finalize-dlq",
        "arn:aws:sqs:us-east-1:123:codspeed-finalize",
    )
    assert _actions("sqs", "StartMessageMoveTask", {"SourceArn": source, "DestinationArn": destination}) == [
        ("sqs:StartMessageMoveTask", source, {}),
        ("sqs:ReceiveMessage", source, {}),
        ("sqs:DeleteMessage", source, {}),
        ("sqs:GetQueueAttributes", source, {}),
        ("sqs:SendMessage", destination, {}),
    ]
    with pytest.raises(Unmapped, match="without DestinationArn"):
        needs("sqs", "StartMessageMoveTask", {"SourceArn": source}, "us-east-1", "123")
    assert _actions("sqs", "ListMessageMoveTasks", {"SourceArn": source}) == [("sqs:ListMessageMoveTasks", source, {})]
    with pytest.raises(Unmapped, match="no IAM mapping for sqs.CancelMessageMoveTask"):
        needs("sqs", "CancelMessageMoveTask", {"TaskHandle": "t"}, "us-east-1", "123")


def test_every_use_case_is_held_to_its_functions_role_the_parts_send_included():
    """A use case missing here ran unheld when a test drove it outside a handler (the shard's send's
    calls, driven through the operator's session, were held to no role)."""
    from pathlib import Path

    from codspeed_aggregator import use_cases
    from codspeed_local.iam.enforcer import USE_CASE_FUNCTIONS

    modules = {p.stem for p in Path(use_cases.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert modules == {name.split(".")[0] for name in USE_CASE_FUNCTIONS}
    assert USE_CASE_FUNCTIONS["forward_shard"] == "FinalizerFunction"
