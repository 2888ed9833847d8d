"""SQS's message move tasks (StartMessageMoveTask, ListMessageMoveTasks), which moto lacks, as
SQS's API reference describes them, answered on a botocore client through its event hooks:
the source must be a dead-letter queue of another queue; no destination means back to that
queue; one active task per source queue; a task's handle is listed only while it runs.
``running=True`` leaves the next task running (to see the one-task rule and a caller that waits)."""

import json
import time
import uuid

from botocore.awsrequest import AWSResponse


class MessageMoveTasks:
    def __init__(self, mover) -> None:
        self.mover = mover  # a plain client of moto's SQS: it does the moving
        self.tasks: list[dict] = []  # newest first
        self.running = False

    def install(self, client):
        """Answer the two operations on ``client`` (the call's parameters are kept as it is built)."""
        handlers = {"StartMessageMoveTask": self._start, "ListMessageMoveTasks": self._list}

        def keep(params, context, **_):
            context["move_task_params"] = dict(params)

        def answer(model, context, **_):
            return handlers[model.name](context["move_task_params"]) if model.name in handlers else None

        events = client.meta.events
        events.register("before-parameter-build.sqs.*", keep, unique_id="move-tasks-keep")
        events.register_first("before-call.sqs.*", answer, unique_id="move-tasks")

        def remove():
            events.unregister("before-parameter-build.sqs.*", unique_id="move-tasks-keep")
            events.unregister("before-call.sqs.*", unique_id="move-tasks")

        return remove

    def _url(self, arn: str) -> str | None:
        name = arn.rsplit(":", 1)[-1]
        try:
            return self.mover.get_queue_url(QueueName=name)["QueueUrl"]
        except self.mover.exceptions.QueueDoesNotExist:
            return None

    def _sources_of(self, dead_letter_arn: str) -> list[str]:
        found = []
        for url in self.mover.list_queues().get("QueueUrls", []):
            attributes = self.mover.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            if json.loads(attributes.get("RedrivePolicy") or "{}").get("deadLetterTargetArn") == dead_letter_arn:
                found.append(attributes["QueueArn"])
        return found

    def _start(self, params: dict):
        source = params["SourceArn"]
        source_url = self._url(source)
        if source_url is None:
            return _error(
                "ResourceNotFoundException",
                "The resource that you specified for the SourceArn parameter doesn't exist.",
            )
        origins = self._sources_of(source)
        if not origins:
            return _error("InvalidParameterValueException", "Source queue must be configured as a Dead Letter Queue.")
        if any(t["SourceArn"] == source and t["Status"] == "RUNNING" for t in self.tasks):
            return _error(
                "UnsupportedOperation",
                "There is already a task running. Only one active task is allowed for "
                "a source queue arn at a given time.",
            )
        destination_url = self._url(params.get("DestinationArn") or origins[0])
        to_move = int(
            self.mover.get_queue_attributes(QueueUrl=source_url, AttributeNames=["ApproximateNumberOfMessages"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"]
        )
        task = {
            "TaskHandle": uuid.uuid4().hex,
            "SourceArn": source,
            "Status": "RUNNING",
            "ApproximateNumberOfMessagesMoved": 0,
            "ApproximateNumberOfMessagesToMove": to_move,
            "StartedTimestamp": int(time.time() * 1000),
            **({"DestinationArn": params["DestinationArn"]} if params.get("DestinationArn") else {}),
        }
        self.tasks.insert(0, task)
        if not self.running:
            while messages := self.mover.receive_message(QueueUrl=source_url, MaxNumberOfMessages=10).get("Messages"):
                for message in messages:
                    self.mover.send_message(QueueUrl=destination_url, MessageBody=message["Body"])
                    self.mover.delete_message(QueueUrl=source_url, ReceiptHandle=message["ReceiptHandle"])
                    task["ApproximateNumberOfMessagesMoved"] += 1
            task["Status"] = "COMPLETED"
        return _answer({"TaskHandle": task["TaskHandle"]})

    def _list(self, params: dict):
        mine = [t for t in self.tasks if t["SourceArn"] == params["SourceArn"]][: params.get("MaxResults", 1)]
        return _answer(
            {
                "Results": [
                    t if t["Status"] == "RUNNING" else {k: v for k, v in t.items() if k != "TaskHandle"} for t in mine
                ]
            }
        )


def _answer(parsed: dict):
    return AWSResponse("https://sqs.us-east-1.amazonaws.com", 200, {}, None), {
        **parsed,
        "ResponseMetadata": {"HTTPStatusCode": 200},
    }


def _error(code: str, message: str):
    return AWSResponse("https://sqs.us-east-1.amazonaws.com", 400, {}, None), {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }
