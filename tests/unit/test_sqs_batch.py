"""An SQS batch answered as Lambda's partial batch response: the failed messages named, the others
deleted, and a batch whose every message failed an error (SQS keeps them all)."""

import pytest

from codspeed_aggregator.handlers.sqs_batch import AllRecordsFailed, partial_response


def _batch(*bodies: str) -> dict:
    return {"Records": [{"messageId": f"m-{i}", "body": body, "attributes": {}} for i, body in enumerate(bodies)]}


def _fails_on(bad: str):
    seen = []

    def handle(record) -> None:
        seen.append(record.body)
        if record.body == bad:
            raise RuntimeError(f"cannot take {bad}")

    return handle, seen


def test_only_the_messages_that_failed_are_handed_back_and_every_message_is_tried():
    handle, seen = _fails_on("b")
    assert partial_response(_batch("a", "b", "c"), handle) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert seen == ["a", "b", "c"]


def test_a_batch_that_all_failed_fails_the_invocation_naming_the_first_error():
    handle, seen = _fails_on("a")
    with pytest.raises(AllRecordsFailed, match=r"All records failed processing \(2\): RuntimeError\('cannot take a'\)"):
        partial_response(_batch("a", "a"), handle)
    assert seen == ["a", "a"]


def test_an_empty_batch_fails_nothing():
    handle, seen = _fails_on("a")
    assert partial_response({"Records": []}, handle) == {"batchItemFailures": []}
    assert seen == []


@pytest.mark.parametrize("event", [{}, {"Records": {"messageId": "m"}}, {"Records": None}])
def test_an_event_that_is_no_sqs_batch_is_refused_before_any_message_is_handled(event):
    handle, seen = _fails_on("a")
    with pytest.raises(ValueError, match="not an SQS batch: the event has no list of Records"):
        partial_response(event, handle)
    assert seen == []
