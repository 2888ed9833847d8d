"""moto's shortcuts in the local stack (``codspeed_local.moto_speedups``) give moto's own answers:
here, an update expression checked and parsed once, against moto's checks at every node and its parse
at every update, a value's size, a message's retention read from its queue's one attribute, and a
response class's methods listed once."""

import os
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from codspeed_local.moto_speedups import speed_up_moto
from codspeed_local.moto_update_checks import moto_own_update_checks

ARRIVAL = (  # a shard's arrival, the suite's costliest update: twenty actions of the three kinds
    "SET #state = :s, upload_id = :s, #key = :s, #size = :n, benchmarks = :n, pids = :l, arrived_at = :n, "
    "requested_at = :n, label = :s, executor = :s, gzipped = :t, version_id = :s, md5 = :s, normalized = :s, "
    "#group = :s, results_kept = :t, cost_ms = :n, longest_ms = :n, expires_at = if_not_exists(expires_at, :n) "
    "REMOVE reason, inherited_from, upstream ADD attempt :one, rev :one"
)
NAMES = {"#state": "state", "#key": "key", "#size": "size", "#group": "group"}
CASES = {  # (expression, names): the answer with an item, and with none yet
    "a shard's arrival": (ARRIVAL, NAMES, "updated", "updated"),
    "functions and every clause": (
        "SET a = :s, l = list_append(if_not_exists(l, :l), :l) ADD n :one, tags :ss REMOVE gone DELETE set_of :ss",
        {},
        "updated",
        "updated",
    ),
    "nested paths": ("SET m.k1 = :s, l[0] = :s, m.k2 = if_not_exists(m.k2, :n)", {}, "updated", "refused"),
    "two SET clauses": ("SET a = :s SET b = :s", {}, "refused", "refused"),
    "two ADD and two SET clauses": ("ADD a :one SET b = :s SET c = :s ADD d :one", {}, "refused", "refused"),
    "overlapping paths": ("SET m.k1 = :s, m = :s", {}, "refused", "refused"),
    "one attribute by two names": ("SET #x = :s, #y = :s", {"#x": "same", "#y": "same"}, "refused", "refused"),
    "an attribute set and removed": ("SET a = :s REMOVE a", {}, "refused", "refused"),
    "a name never given": ("SET #missing = :s", {}, "refused", "refused"),
    "a value never given": ("SET a = :nothing", {}, "refused", "refused"),
    "the table's key": ("SET pk = :s", {}, "refused", "refused"),
    "a number added to a list": ("ADD l :one", {}, "refused", "updated"),
}
VALUES = {
    ":s": {"S": "x"},
    ":n": {"N": "7"},
    ":one": {"N": "1"},
    ":t": {"BOOL": True},
    ":l": {"L": [{"S": "y"}]},
    ":ss": {"SS": ["p", "q"]},
}
START = {
    "m": {"M": {"k2": {"N": "1"}}},
    "l": {"L": [{"S": "z"}]},
    "set_of": {"SS": ["p", "r"]},
    "gone": {"S": "g"},
    "reason": {"S": "r"},
    "rev": {"N": "3"},
}


@pytest.fixture(scope="module")
def table(stack):
    db = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    name = f"moto-speedups-{uuid.uuid4().hex[:12]}"
    db.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return db, name


def _update(db, table: str, key: str, expression: str, names: dict, *, new: bool) -> tuple:
    if not new:
        db.put_item(TableName=table, Item={"pk": {"S": key}, **START})
    used = {k: v for k, v in VALUES.items() if k in expression}
    try:
        db.update_item(
            TableName=table,
            Key={"pk": {"S": key}},
            UpdateExpression=expression,
            **({"ExpressionAttributeNames": names} if names else {}),
            **({"ExpressionAttributeValues": used} if used else {}),
        )
    except ClientError as refused:
        answer: tuple = ("refused", refused.response["Error"]["Code"], refused.response["Error"]["Message"])
    else:
        answer = ("updated",)
    item = db.get_item(TableName=table, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")
    return (*answer, {k: v for k, v in (item or {}).items() if k != "pk"})


@pytest.mark.parametrize("new", [False, True], ids=["an item", "no item yet"])
@pytest.mark.parametrize("case", CASES)
def test_an_update_checked_once_on_the_whole_is_moto_s_own_answer_and_item(table, case, new):
    db, name = table
    expression, names, with_item, without = CASES[case]
    once = _update(db, name, f"once-{uuid.uuid4().hex}", expression, names, new=new)
    again = _update(db, name, f"again-{uuid.uuid4().hex}", expression, names, new=new)  # its tree parsed before
    with moto_own_update_checks():
        own = _update(db, name, f"own-{uuid.uuid4().hex}", expression, names, new=new)
    assert once == again == own
    assert once[0] == (without if new else with_item), once


@pytest.mark.parametrize(
    ("retention", "age", "kept"),
    [("60", 55, True), ("60", 65, False), (None, 3 * 86400, True), (None, 5 * 86400, False)],
    ids=["within 60 s", "past 60 s", "within moto's four days", "past moto's four days"],
)
def test_a_messages_retention_read_once_is_moto_s_own_answer(retention, age, kept):
    from moto.core.utils import unix_time_millis
    from moto.sqs.models import Message, SQSBackend

    speed_up_moto()
    backend = SQSBackend("us-east-1", "123456789012")
    backend.create_queue("retained", **({"MessageRetentionPeriod": retention} if retention else {}))
    message = Message("m-1", "body")
    message.sent_timestamp = int(unix_time_millis()) - age * 1000
    read_once = SQSBackend.is_message_valid_based_on_retention_period
    assert read_once(backend, "retained", message) is kept
    assert read_once.moto_own(backend, "retained", message) is kept


_NUMBERS = st.decimals(allow_nan=False, allow_infinity=False).map(str)
_SCALARS = st.one_of(
    st.text().map(lambda v: {"S": v}),
    _NUMBERS.map(lambda v: {"N": v}),
    st.binary().map(lambda v: {"B": v}),
    st.booleans().map(lambda v: {"BOOL": v}),
    st.just({"NULL": True}),
    st.lists(st.text(), min_size=1, unique=True).map(lambda v: {"SS": v}),
    st.lists(_NUMBERS, min_size=1, unique=True).map(lambda v: {"NS": v}),
    st.lists(st.binary(), min_size=1, unique=True).map(lambda v: {"BS": v}),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda v: {"L": v}),
        st.dictionaries(st.text(max_size=8), inner, max_size=4).map(lambda v: {"M": v}),
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(_VALUES)
def test_a_value_sized_in_place_is_moto_s_own_size_of_it(value):
    from moto.dynamodb.models.dynamo_type import DynamoType

    speed_up_moto()
    typed = DynamoType(value)
    assert DynamoType.size(typed) == DynamoType.size.moto_own(typed)


def test_a_response_classs_methods_listed_once_are_moto_s_own_listing_of_them(stack):
    from moto.core import responses
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.responses import S3Response
    from moto.sqs.responses import SQSResponse

    speed_up_moto()
    listed = responses.method_names_from_class
    for response in (DynamoHandler, S3Response, SQSResponse):
        assert listed(response) == listed.__wrapped__(response)
    assert "get_item" in listed(DynamoHandler) and "receive_message" in listed(SQSResponse)
    assert listed.cache_info().hits >= 3  # the stack's own requests and this test's second asks


def test_on_another_moto_the_stack_says_so_in_a_sentence_and_runs_without_its_shortcuts(caplog, monkeypatch):
    from codspeed_local import moto_server

    monkeypatch.delenv(moto_server.SPEEDUPS, raising=False)
    assert moto_server.shortcuts_apply(moto_server.MOTO_PATCHED)
    assert not moto_server.shortcuts_apply("5.3.0")
    assert caplog.messages[-1] == (
        f"moto 5.3.0 is not the {moto_server.MOTO_PATCHED} the local stack's shortcuts were written for: it serves "
        "without them, slower"
    )


def test_the_local_extra_pins_the_moto_the_shortcuts_were_written_for():
    import re
    from pathlib import Path

    from codspeed_local.moto_server import MOTO_PATCHED

    root = Path(__file__).resolve().parents[2]
    extras = re.findall(r'"moto\[server\]==([0-9.]+)"', (root / "pyproject.toml").read_text())
    assert extras == [MOTO_PATCHED, MOTO_PATCHED]  # the local extra and the test extra
    assert f"moto=={MOTO_PATCHED}" in (root / "constraints.txt").read_text().splitlines()
