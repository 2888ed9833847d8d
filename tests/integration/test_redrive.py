"""A forward that fails every try: the run is forward_failed, its message ends in the
dead-letter queue, and `codspeed-aggregator redrive` later gets it forwarded, once."""

import subprocess
import sys
from contextlib import contextmanager

import boto3

from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.cli import main
from codspeed_wire.queue import FinalizeMessage
from tests.faults import _pushed
from tests.sqs_move_tasks import MessageMoveTasks


@contextmanager
def _move_tasks(running: bool = False):
    """SQS's message move tasks on the operator's client (the command's): moto has none."""
    tasks = MessageMoveTasks(boto3.session.Session().client("sqs"))
    tasks.running = running
    remove = tasks.install(client("sqs"))
    try:
        yield tasks
    finally:
        remove()


def test_the_dead_letter_queue_keeps_a_failed_forward_and_redrive_forwards_it_once(isolated, project, run_id, capsys):
    agg, sqs, queues = isolated.aggregator, isolated.sqs, isolated.resources
    for key in _pushed(agg, project, run_id):
        agg.record_arrival.record(key)
    isolated.finalize_requests()
    agg.queue.request(project, run_id, "complete")
    sqs.set_queue_attributes(QueueUrl=queues.finalize_queue_url, Attributes={"VisibilityTimeout": "0"})
    try:
        receives = 0
        while True:  # Lambda's SQS poller: each receive fails, the message comes back, until maxReceiveCount
            messages = sqs.receive_message(QueueUrl=queues.finalize_queue_url, MaxNumberOfMessages=1).get(
                "Messages", []
            )
            if not messages:
                break
            message = FinalizeMessage.model_validate_json(messages[0]["Body"])
            if message.run_id != run_id:  # another test's close, asking again later: not this one's
                sqs.delete_message(QueueUrl=queues.finalize_queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
                continue
            receives += 1
            isolated.upstream.failures.extend([502] * agg.upstream.attempts)
            try:
                agg.finalize_run.finalize(message.project, message.run_id)
            except Exception:
                pass
    finally:
        sqs.set_queue_attributes(QueueUrl=queues.finalize_queue_url, Attributes={"VisibilityTimeout": "5"})
        isolated.upstream.failures.clear()
    assert receives == 3  # maxReceiveCount
    report = agg.reports.report(project, run_id)
    assert (
        report.state == "forward_failed"
        and "502" in report.upstream.message
        and len(isolated.upstream.uploads(run_id)) == 0
    )

    with _move_tasks():
        assert (
            main(["redrive", "--dead-letter-url", queues.finalize_dlq_url, "--queue-url", queues.finalize_queue_url])
            == 0
        )
    assert (
        capsys.readouterr().out.strip() == f"redrove 1 of 1 finalize message to {queues.finalize_queue_url} (completed)"
    )
    [message] = [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    assert agg.finalize_run.finalize(message["project"], message["run_id"]) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1 and agg.reports.report(project, run_id).state == "forwarded"


def test_redrive_without_queues_says_what_to_give():
    result = subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "redrive"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2 and "give --dead-letter-url and --queue-url" in result.stderr


def test_redrive_of_a_queue_that_is_no_dead_letter_queue_is_refused_and_moves_nothing(isolated, capsys):
    queues, sqs = isolated.resources, isolated.sqs
    sqs.send_message(QueueUrl=queues.arrivals_queue_url, MessageBody="an arrival")
    before = sqs.get_queue_attributes(
        QueueUrl=queues.arrivals_queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    with _move_tasks() as tasks:
        assert (
            main(["redrive", "--dead-letter-url", queues.arrivals_queue_url, "--queue-url", queues.finalize_queue_url])
            == 3
        )
    assert (
        capsys.readouterr().err.strip().endswith("Source queue must be configured as a Dead Letter Queue.")
        and tasks.tasks == []
    )
    assert (
        sqs.get_queue_attributes(QueueUrl=queues.arrivals_queue_url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]
        == before["Attributes"]
    )
    sqs.purge_queue(QueueUrl=queues.arrivals_queue_url)


def test_a_redrive_left_running_says_so_and_a_second_one_is_refused_while_it_runs(isolated, capsys):
    queues = isolated.resources
    with _move_tasks(running=True) as tasks:
        assert (
            main(
                [
                    "redrive",
                    "--wait",
                    "0",
                    "--dead-letter-url",
                    queues.finalize_dlq_url,
                    "--queue-url",
                    queues.finalize_queue_url,
                ]
            )
            == 0
        )
        assert "SQS goes on" in capsys.readouterr().out
        assert (
            main(["redrive", "--dead-letter-url", queues.finalize_dlq_url, "--queue-url", queues.finalize_queue_url])
            == 3
        )
    assert "Only one active task is allowed for a source queue" in capsys.readouterr().err
    assert [t["Status"] for t in tasks.tasks] == ["RUNNING"]


def test_an_arrival_in_its_dead_letter_queue_is_redriven_and_counted_once(isolated, project, run_id, capsys):
    """Its event waited 14 days with no redrive while its bundle could expire: ``redrive --queue arrivals``
    moves it back, and the arrivals function counts it (twice delivered, once counted)."""
    import json
    from urllib.parse import quote_plus

    from codspeed_aggregator.handlers.arrivals import s3_objects
    from tests.factories import bundle, push

    agg, queues = isolated.aggregator, isolated.resources
    isolated.take(queues.arrivals_queue_url)  # nobody polls it: the events of the worker's tests before
    data = bundle(4242, ["dead::letter"])
    granted = push(agg, project, run_id, "1", data, total=2)
    created = {"key": quote_plus(granted["key"]), "size": len(data)}
    event = {
        "Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": queues.bucket}, "object": created}}]
    }
    agg.arrivals_queue.dead_letter(json.dumps(event), "failed every retry")  # as its maxReceiveCount left it
    with _move_tasks():
        command = ["redrive", "--queue", "arrivals", "--dead-letter-url", queues.arrivals_dlq_url]
        assert main([*command, "--queue-url", queues.arrivals_queue_url]) == 0
    said = capsys.readouterr().out.strip()
    assert said == f"redrove 1 of 1 arrivals message to {queues.arrivals_queue_url} (completed)"
    bodies = isolated.take(queues.arrivals_queue_url)
    assert len(bodies) == 2 and json.dumps(event) in bodies  # moved back, beside the event the PUT itself sent
    objects = [o for body in bodies for o in s3_objects(json.loads(body)) if o[0] == granted["key"]]
    assert sorted(agg.record_arrival.record(*o) for o in objects) == ["duplicate", "recorded"]
    assert agg.reports.report(project, run_id).arrived == 1


def test_redrive_of_the_arrivals_without_queues_names_their_outputs():
    result = subprocess.run(
        [sys.executable, "-m", "codspeed_aggregator.cli", "redrive", "--queue", "arrivals"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "ArrivalsDeadLetterQueueUrl and ArrivalsQueueUrl outputs), or set ARRIVALS_DLQ_URL" in result.stderr


def _delete_every_version(agg, key: str) -> None:
    """What S3's lifecycle has done by then: every version of the bundle gone."""
    s3, bucket = agg.store.s3, agg.store.bucket
    listed = s3.list_object_versions(Bucket=bucket, Prefix=key)
    for version in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
        s3.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])


def test_a_dead_letter_of_a_shard_already_counted_is_a_no_op_at_any_age_its_bundle_there_or_gone(
    isolated, project, run_id
):
    """The close counted shard 2 itself (its event lost) and sent it; its arrival, redriven days later
    from the dead-letter queue, counts nothing again, whether the lifecycle took its bundle or not."""
    from codspeed_wire.api import CloseRequest
    from tests.factories import bundle, push

    agg = isolated.aggregator
    keys = [push(agg, project, run_id, str(i), bundle(4240 + i, [f"t{i}::a"]), total=2)["key"] for i in (1, 2)]
    agg.record_arrival.record(keys[0])
    agg.record_arrival.record(keys[1])  # as the close's backstop counts it, its own event never come
    agg.close_run.close(CloseRequest(project=project, run_id=run_id))
    assert isolated.finalize_all(project, run_id) == "forwarded"
    sent = len(isolated.upstream.uploads(run_id))
    assert agg.record_arrival.record(keys[1]) == "duplicate"  # redriven with its bundle there
    _delete_every_version(agg, keys[1])
    assert agg.record_arrival.record(keys[1]) == "duplicate"  # and once the lifecycle took it
    report = agg.reports.report(project, run_id)
    assert (report.state, report.arrived, len(isolated.upstream.uploads(run_id))) == ("forwarded", 2, sent)


def test_a_dead_letter_whose_bundle_is_gone_and_was_never_counted_notes_the_shard_with_why_not_a_retry(
    isolated, project, run_id
):
    """Before: its arrival raised MissingObject at every retry, back to the dead-letter queue."""
    from codspeed_aggregator.use_cases.record_arrival import GONE
    from tests.factories import bundle, push

    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(4241), total=2)["key"])
    lost = push(agg, project, run_id, "2", bundle(4242), total=2)["key"]
    _delete_every_version(agg, lost)
    assert agg.record_arrival.record(lost) == "rejected"
    shard = {s.name: s for s in agg.reports.report(project, run_id).shards}["2"]
    assert (shard.state, shard.reason) == ("rejected", GONE)
    assert agg.record_arrival.record(lost) == "duplicate"  # redriven again: nothing more
