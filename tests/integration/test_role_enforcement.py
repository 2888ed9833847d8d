"""The local stack refuses what a function's role does not allow, as AWS does: an AccessDenied
naming the role, the action and the resource, before anything is sent, so nothing changes."""

import pytest
import requests
from botocore.exceptions import ClientError

from codspeed_aggregator import wiring
from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.sweeper_wiring import SWEEPER


def _exists(stack, key: str) -> bool:
    listed = client("s3").list_objects_v2(Bucket=stack.resources.bucket, Prefix=key)
    return listed.get("KeyCount", 0) > 0


def test_a_write_outside_the_functions_role_is_access_denied_and_writes_nothing(stack):
    key = "spool/acme/denied/run/part-0000.tar.gz"
    with pytest.raises(ClientError) as refused:
        client("s3", wiring.API).put_object(Bucket=stack.resources.bucket, Key=key, Body=b"x")
    error = refused.value.response["Error"]
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403 and error["Code"] == "AccessDenied"
    assert error["Message"] == (
        "User: arn:aws:sts::123456789012:assumed-role/ApiFunctionRole/ApiFunction is not authorized to perform: "
        f"s3:PutObject on resource: arn:aws:s3:::{stack.resources.bucket}/{key} "
        "because no identity-based policy allows the s3:PutObject action"
    )
    assert not _exists(stack, key)
    assert (
        "ApiFunction",
        "s3:PutObject",
        f"arn:aws:s3:::{stack.resources.bucket}/spool/*",
        "not allowed",
    ) in stack.enforcer.seen


def test_a_table_call_outside_the_role_is_access_denied_exception(stack):
    table = stack.resources.table
    with pytest.raises(ClientError) as refused:
        client("dynamodb", SWEEPER).put_item(TableName=table, Item={"pk": {"S": "x"}, "sk": {"S": "y"}})
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    assert f"dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:123456789012:table/{table}" in str(refused.value)
    assert "Item" not in client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "x"}, "sk": {"S": "y"}})


def test_a_url_presigned_by_a_role_that_may_not_put_is_refused_when_used(stack):
    key = "bundles/acme/denied/run/1/presigned.tar.gz"
    url = client("s3", wiring.ARRIVALS).generate_presigned_url(
        "put_object", Params={"Bucket": stack.resources.bucket, "Key": key}, ExpiresIn=60
    )
    answer = requests.put(url, data=b"bundle", timeout=10)
    assert answer.status_code == 403 and "<Code>AccessDenied</Code>" in answer.text
    assert "ArrivalsFunction is not authorized to perform: s3:PutObject" in answer.text
    assert not _exists(stack, key)
    allowed = client("s3", wiring.API).generate_presigned_url(  # the api function's role may: it goes through
        "put_object", Params={"Bucket": stack.resources.bucket, "Key": key}, ExpiresIn=60
    )
    assert requests.put(allowed, data=b"bundle", timeout=10).status_code == 200 and _exists(stack, key)


def test_a_use_case_driven_by_hand_is_held_to_the_role_of_the_function_that_runs_it(isolated, project, run_id):
    from unittest import mock

    from codspeed_aggregator.domain.keys import bundle_key
    from codspeed_local.iam import acting_function
    from codspeed_wire.api import CloseRequest

    agg, seen = isolated.aggregator, []

    def noting(answer):
        return lambda *args, **kwargs: seen.append(acting_function()) or answer

    assert acting_function() is None  # a test's own calls: held to no role
    with (
        mock.patch.object(agg.ledger.runs, "open_runs_past", noting([])),
        mock.patch.object(agg.ledger.runs, "stalled_finalizing", noting([])),
        mock.patch.object(agg.ledger.reads, "snapshot", noting(None)),
        mock.patch.object(
            agg.ledger.reads, "arrival_view", side_effect=lambda *a: seen.append(acting_function()) or 1 / 0
        ),
    ):
        agg.sweep_deadlines.sweep()
        with pytest.raises(Exception, match="no run"):
            agg.close_run.close(CloseRequest(project=project, run_id=run_id))
        with pytest.raises(ZeroDivisionError):
            agg.record_arrival.record(bundle_key(project, run_id, "1", "0123abcd"))
    assert seen == ["SweeperFunction", "SweeperFunction", "ApiFunction", "ArrivalsFunction"]


def test_a_read_of_an_absent_key_is_access_denied_to_a_role_that_may_not_list_it(stack):
    """S3 answers 404 only to whoever may list the bucket: to the others an absent key is 403,
    so a function must not read results it has no reason to believe exist."""
    bucket, key = stack.resources.bucket, "results/acme%2Fnone/run/1/absent.json.gz"
    with pytest.raises(ClientError) as refused:
        client("s3", wiring.API).get_object(Bucket=bucket, Key=key)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as absent:
        client("s3").get_object(Bucket=bucket, Key=key)  # the operator's own credentials may list
    assert absent.value.response["Error"]["Code"] == "NoSuchKey"
    client("s3").put_object(Bucket=bucket, Key=key, Body=b"{}")
    assert client("s3", wiring.API).get_object(Bucket=bucket, Key=key)["Body"].read() == b"{}"  # granted: it exists
