"""The finalize queue: a message asks the finalizer to finish one run."""

from pydantic import BaseModel


class FinalizeMessage(BaseModel):
    project: str
    run_id: str
    reason: str


class FinalizeQueue:
    def __init__(self, url: str, client) -> None:
        self.url = url
        self.sqs = client

    def request(self, project: str, run_id: str, reason: str) -> None:
        message = FinalizeMessage(project=project, run_id=run_id, reason=reason)
        self.sqs.send_message(QueueUrl=self.url, MessageBody=message.model_dump_json())
