"""A forward that finishes whatever fails on its way: what a run owes once it is written forwarded (its
branch's records, its bundles tagged, its final report) is recorded as owed in that write and done by
whoever comes next, each step once, nothing upstream again. Against moto's server, step by step."""

from dataclasses import replace

import pytest
from botocore.exceptions import ClientError

from codspeed_wire.api import CloseRequest
from tests.factories import Clock, bundle, grant, push

# each step after the point of no return, as the finalizer's adapters make it: (adapter, method)
STEPS = [
    ("baselines", "record_forwarded"),
    ("baselines", "record_baseline"),
    ("store", "mark_final"),
    ("reports", "publish"),
]


def _slowed_once(monkeypatch, target, method: str, after: list[bool]) -> None:
    """``method`` of ``target`` answers SlowDown once, the first time it is called once ``after`` is set
    (the adapters are the session's: the test's monkeypatch puts them back)."""
    original, failed = getattr(target, method), []

    def once(*args, **kwargs):
        if after and not failed:
            failed.append(1)
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "reduce your request rate"}}, method)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, method, once)


@pytest.mark.parametrize("mode", ["parts", "one-upload"])
@pytest.mark.parametrize("adapter, method", STEPS, ids=[m for _, m in STEPS])
def test_a_fault_once_after_the_run_is_written_forwarded_is_finished_by_the_retry(
    isolated, project, run_id, mode, adapter, method, monkeypatch
):
    """Before: the run item said forwarded, its report stayed finalizing for good, its bundles were
    never tagged (so never expired), and a branch's baseline stayed where it was."""
    base = isolated.aggregator
    agg = replace(base, settings=replace(base.settings, forward_mode=mode, forward_modes=()))
    keys = [push(agg, project, run_id, str(i), bundle(4240 + i, [f"t{i}::a"]), total=2)["key"] for i in (1, 2)]
    for key in keys:
        agg.record_arrival.record(key)
    for message in isolated.finalize_requests():  # a parts run's sends, as its queue hands them out
        if message.get("shard") and message["run_id"] == run_id:
            agg.forward_shard.forward(project, run_id, message["shard"])
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    forwarded = []
    finish = agg.ledger.runs.finish

    def finishing(*args, **kwargs):
        written = finish(*args, **kwargs)
        forwarded.append(written)
        return written

    monkeypatch.setattr(agg.ledger.runs, "finish", finishing)
    target = agg.ledger.baselines if adapter == "baselines" else getattr(agg, adapter)
    _slowed_once(monkeypatch, target, method, forwarded)
    with pytest.raises(ClientError):
        agg.finalize_run.finalize(project, run_id)
    run = agg.ledger.runs.run_record(project, run_id)
    assert (run.state, run.forward.owed) == ("forwarded", True)  # the point of no return passed, what follows owed
    sent = len(isolated.upstream.uploads(run_id))
    assert agg.finalize_run.finalize(project, run_id) == "forwarded"  # the same message, retried
    assert len(isolated.upstream.uploads(run_id)) == sent  # nothing upstream again
    assert agg.ledger.runs.run_record(project, run_id).forward.owed is False
    assert agg.reports.report(project, run_id).state == "forwarded"
    assert agg.ledger.baselines.latest_baseline(project, "main") == run_id
    s3 = agg.store.s3
    assert all(s3.get_object_tagging(Bucket=agg.store.bucket, Key=k)["TagSet"] for k in keys)  # tagged: expiring
    assert agg.finalize_run.finalize(project, run_id) == "not_claimed"  # owed nothing: a third delivery is a no-op


def test_a_run_closed_empty_owes_its_tags_and_report_until_they_are_done(isolated, project, run_id, monkeypatch):
    clock = Clock()
    agg = replace(isolated.aggregator, clock=clock)
    grant(agg, project, run_id, "1", bundle(), total=2)  # granted, never sent
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    clock.now += agg.settings.presign_expiry_seconds + 1
    _slowed_once(monkeypatch, agg.store, "mark_final", [True])
    with pytest.raises(ClientError):
        agg.finalize_run.finalize(project, run_id)
    assert agg.ledger.runs.run_record(project, run_id).forward.owed
    assert agg.finalize_run.finalize(project, run_id) == "closed_empty"
    assert agg.reports.report(project, run_id).state == "closed_empty"
    assert agg.ledger.runs.run_record(project, run_id).forward.owed is False


@pytest.mark.parametrize(
    "code, calls",
    [("AccessDenied", 1), ("ValidationException", 1), ("ProvisionedThroughputExceededException", 2)],
)
def test_the_finalizers_write_retries_only_what_aws_says_is_transient(
    isolated, project, run_id, monkeypatch, code, calls
):
    """Before: every ClientError was tried five times, on top of botocore's own attempts."""
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=1)["key"])
    finish, made = agg.ledger.runs.finish, []

    def refused_once(*args, **kwargs):
        made.append(1)
        if len(made) == 1:
            raise ClientError({"Error": {"Code": code, "Message": "no"}}, "UpdateItem")
        return finish(*args, **kwargs)

    monkeypatch.setattr(agg.ledger.runs, "finish", refused_once)
    monkeypatch.setattr(agg.ledger.runs, "sleep", lambda seconds: None)
    if calls == 1:
        with pytest.raises(ClientError, match=code):
            agg.finalize_run.finalize(project, run_id)
    else:
        assert agg.finalize_run.finalize(project, run_id) == "forwarded"
    assert len(made) == calls
