"""One list of what AWS answers when it is busy, read by the API's 503 and the finalizer's write retry."""

import pytest
from botocore.exceptions import ClientError

from codspeed_aggregator.aws_faults import transient


def _error(code: str, status: int = 400, reasons: list[str] | None = None) -> ClientError:
    response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    if reasons is not None:
        response["CancellationReasons"] = [{"Code": r} for r in reasons]
    return ClientError(response, "TransactWriteItems")


@pytest.mark.parametrize(
    "error, busy",
    [
        (_error("ThrottlingException"), True),
        (_error("SlowDown", 503), True),
        (_error("SomethingNew", 500), True),  # a 5xx whatever its code
        (_error("TransactionCanceledException", 400, ["None", "ThrottlingError"]), True),
        (_error("TransactionCanceledException", 400, ["TransactionConflict", "None"]), True),
        (_error("TransactionCanceledException", 400, ["ConditionalCheckFailed", "ThrottlingError"]), False),
        (_error("AccessDenied", 403), False),
        (_error("ValidationException"), False),
        (ValueError("not AWS"), False),
    ],
)
def test_busy_or_failing_is_transient_a_request_refused_is_not(error, busy):
    assert transient(error) is busy
