"""The webhooks: signed instead of carrying the API token. A refresh asks for a run's report again;
GitHub's ``workflow_run`` completed closes the CI run's aggregator run."""

import time
from http import HTTPStatus
from typing import TypeVar

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import BaseModel, ValidationError

from codspeed_wire.webhooks import RefreshRequest, WorkflowRunEvent

from .. import wiring
from ..auth import check_fresh, check_github_signature, check_signature, github_payload
from ..domain.errors import Unprocessable
from .http import JsonResponse, json_response, raw_body

M = TypeVar("M", bound=BaseModel)

router = APIGatewayHttpRouter()


def _signature() -> str | None:
    return router.current_event.headers.get("x-hub-signature-256")


def _parse(model: type[M], raw: bytes) -> M:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
        raise Unprocessable(f"invalid webhook body: {fields}") from exc


@router.post("/webhooks/refresh")
def refresh_webhook() -> JsonResponse:
    raw = raw_body(router)
    check_signature(raw, _signature(), wiring.webhook_secret())  # nothing is parsed before
    request = _parse(RefreshRequest, raw)
    check_fresh(request.timestamp, time.time())
    report = wiring.for_api().reports.refresh(request.project, request.run_id)
    return json_response(HTTPStatus.OK, {"project": report.project, "run_id": report.run_id, "version": report.version})


@router.post("/webhooks/github")
def github_webhook() -> JsonResponse:
    raw = raw_body(router)
    payload = github_payload(raw, router.current_event.headers.get("content-type"))
    project = check_github_signature(raw, payload, _signature(), wiring.webhook_secret())
    kind = router.current_event.headers.get("x-github-event", "")
    if kind == "ping":
        return json_response(HTTPStatus.OK, {"message": "pong"})
    if kind != "workflow_run":
        return json_response(HTTPStatus.ACCEPTED, {"ignored": f"event {kind or '(none)'}"})
    event = _parse(WorkflowRunEvent, payload)
    if event.action != "completed":
        return json_response(HTTPStatus.ACCEPTED, {"ignored": f"workflow_run {event.action}"})
    run = event.workflow_run
    closed = wiring.for_api().close_run.close_finished_ci_run(project, str(run.id), run.run_attempt)
    return json_response(HTTPStatus.OK, {"closed": closed})
