"""What AWS answers when it is busy or failing, not when a request is wrong: one list, read by the API's
answer (a 503 to come back in seconds) and by the finalizer's write retry. Anything else (an access
denied, a validation error) is a fault of the stack's own: raised at once, for its alarm to see."""

from botocore.exceptions import ClientError

from .adapters.ledger.codec import cancelled

TRANSIENT = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "ThrottlingError",
        "SlowDown",
        "RequestTimeout",
        "InternalServerError",
        "ServiceUnavailable",
        "InternalError",
    }
)
# a transaction DynamoDB cancelled for these reasons of an item (not for a condition): busy, not wrong
_CANCELLED_BUSY = frozenset({"ThrottlingError", "TransactionConflict", "ProvisionedThroughputExceeded"})


def transient(exc: BaseException) -> bool:
    """Whether AWS's answer says "busy or failing, come back": throttling, a 5xx, or a transaction
    cancelled for being throttled or contended (its ``CancellationReasons``), never for a condition."""
    if not isinstance(exc, ClientError):
        return False
    reasons = cancelled(exc)
    if reasons is not None:
        return bool(_CANCELLED_BUSY.intersection(reasons)) and "ConditionalCheckFailed" not in reasons
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return exc.response.get("Error", {}).get("Code") in TRANSIENT or status >= 500
