"""HTTP API: request uploads, CodSpeed's drop-in ``POST /upload``, close, read reports."""

import json
from http import HTTPStatus

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from typing_extensions import Annotated

from codspeed_wire.api import CloseRequest, ShardUploadRequest
from codspeed_wire.report import render_markdown
from codspeed_wire.upstream import UploadMetadata

from ..auth import check_token
from ..domain.errors import Refused
from ..wiring import aggregator, api_token

logger = Logger(service="codspeed-aggregator")
app = APIGatewayHttpResolver(enable_validation=True)


def _json(status: int, body):
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


@app.exception_handler(Refused)
def _refused(exc: Refused):
    return _json(exc.status, {"error": str(exc)})


@app.exception_handler(RequestValidationError)
def _invalid(exc: RequestValidationError):
    detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    fields = "; ".join(_field(d) for d in detail)
    return _json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": f"invalid request: {fields}", "detail": detail})


def _field(detail: dict) -> str:
    if detail["type"] == "json_invalid":
        return "body: not valid JSON"
    return f"{'.'.join(str(p) for p in detail['loc'][1:]) or 'body'}: {detail['msg']}"


@app.post("/v1/uploads")
def request_upload(request: ShardUploadRequest):
    grant = aggregator().request_upload(request)
    logger.info("upload granted", extra={"project": request.project, "run_id": request.run_id, "shard": request.shard})
    return _json(HTTPStatus.CREATED, grant.model_dump())


@app.post("/upload")
def drop_in_upload(metadata: UploadMetadata):
    accepted = aggregator().accept_drop_in(metadata)
    return _json(HTTPStatus.OK, accepted.model_dump())


@app.post("/v1/runs/close")
def close_run(request: CloseRequest):
    answer = aggregator().close(request)
    return _json(HTTPStatus.ACCEPTED, answer.model_dump())


@app.get("/v1/runs/<owner>/<repo>/<run_id>")
def read_report(owner: str, repo: str, run_id: str, format: Annotated[str, Query(pattern="^(json|markdown)$")] = "json"):
    report = aggregator().report(f"{owner}/{repo}", run_id)
    if format == "markdown":
        return Response(status_code=200, content_type="text/markdown; charset=utf-8", body=render_markdown(report))
    return _json(HTTPStatus.OK, report.model_dump(mode="json"))


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict, context) -> dict:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    try:
        check_token(headers.get("authorization"), api_token())
    except Refused as exc:
        return {"statusCode": exc.status, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                "body": json.dumps({"error": str(exc)})}
    return app.resolve(event, context)
