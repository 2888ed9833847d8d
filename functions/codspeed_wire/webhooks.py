"""Webhook payloads: the aggregator's signed refresh, and the part of GitHub's
``workflow_run`` event the aggregator reads."""

from pydantic import ConfigDict

from .model import WireModel
from .names import Project, RunId


class RefreshRequest(WireModel):
    """``POST /webhooks/refresh``: re-render and republish a run's report. The timestamp is
    signed with the body, so an old request cannot be replayed."""

    model_config = ConfigDict(extra="forbid")

    project: Project
    run_id: RunId
    timestamp: int


class _Repository(WireModel):
    full_name: str


class _WorkflowRun(WireModel):
    id: int
    run_attempt: int = 1
    head_sha: str | None = None


class WorkflowRunEvent(WireModel):
    action: str
    workflow_run: _WorkflowRun
    repository: _Repository
