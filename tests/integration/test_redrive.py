"""A forward that fails every try: the run is forward_failed, its message ends in the
dead-letter queue, and `codspeed-aggregator redrive` later gets it forwarded, once."""

import subprocess
import sys

from codspeed_wire.queue import FinalizeMessage
from tests.faults import _pushed


def test_the_dead_letter_queue_keeps_a_failed_forward_and_redrive_forwards_it_once(isolated, project, run_id):
    agg, sqs, queues = isolated.aggregator, isolated.sqs, isolated.resources
    for key in _pushed(agg, project, run_id):
        agg.arrivals.record(key)
    isolated.finalize_requests()
    agg.queue.request(project, run_id, "complete")
    sqs.set_queue_attributes(QueueUrl=queues.finalize_queue_url, Attributes={"VisibilityTimeout": "0"})
    try:
        receives = 0
        while True:  # Lambda's SQS poller: each receive fails, the message comes back, until maxReceiveCount
            messages = sqs.receive_message(QueueUrl=queues.finalize_queue_url, MaxNumberOfMessages=1).get("Messages", [])
            if not messages:
                break
            receives += 1
            message = FinalizeMessage.model_validate_json(messages[0]["Body"])
            isolated.upstream.failures.extend([502] * agg.upstream.attempts)
            try:
                agg.finalizing.finalize(message.project, message.run_id)
            except Exception:
                pass
    finally:
        sqs.set_queue_attributes(QueueUrl=queues.finalize_queue_url, Attributes={"VisibilityTimeout": "5"})
        isolated.upstream.failures.clear()
    assert receives == 3  # maxReceiveCount
    report = agg.reports.report(project, run_id)
    assert report.state == "forward_failed" and "502" in report.upstream.message and len(isolated.upstream.uploads(run_id)) == 0

    env = {"FINALIZE_DLQ_URL": queues.finalize_dlq_url, "FINALIZE_QUEUE_URL": queues.finalize_queue_url}
    moved = subprocess.run([sys.executable, "-m", "codspeed_aggregator.cli", "redrive"], capture_output=True, text=True,
                           env={**__import__("os").environ, **env}, check=True)
    assert moved.stdout.strip() == f"redrove 1 finalize message to {queues.finalize_queue_url}"
    [message] = [m for m in isolated.finalize_requests() if m["run_id"] == run_id]
    assert agg.finalizing.finalize(message["project"], message["run_id"]) == "forwarded"
    assert len(isolated.upstream.uploads(run_id)) == 1 and agg.reports.report(project, run_id).state == "forwarded"


def test_redrive_without_queues_says_what_to_give():
    result = subprocess.run([sys.executable, "-m", "codspeed_aggregator.cli", "redrive"], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and "give --dead-letter-url and --queue-url" in result.stderr
