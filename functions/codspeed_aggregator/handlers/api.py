"""HTTP API: request uploads, CodSpeed's drop-in ``POST /upload``, close, read reports."""

import base64
import json
import re
import time
from urllib.parse import unquote, urlencode
from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from botocore.exceptions import ClientError, ConnectionError as AwsConnectionError
from pydantic import BaseModel, ValidationError

from codspeed_wire.api import CloseRequest, OpenRequest, ShardUploadRequest
from codspeed_rules.names import PROJECT_PATTERN, RUN_ID_PATTERN, SEGMENT, SHARD_KEY_PATTERN, attempt_problem, is_project
from codspeed_wire.report import render_markdown
from codspeed_wire.upstream import UploadMetadata
from codspeed_wire.webhooks import RefreshRequest, WorkflowRunEvent

from ..auth import (
    Principal, authenticate, check_fresh, check_github_signature, check_page_link, check_signature, job_token, signed_for,
    tokenless,
)
from ..pages.run_page import render_list, render_main, render_run
from ..domain.errors import Busy, Refused, Unprocessable
from ..domain.ledger import SentPost
from ..settings import settings
from ..wiring import api, api_token, oidc, webhook_secret

WEBHOOKS = "/webhooks/"  # signed instead of carrying the API token
PAGES = "/runs/"  # opened by a signed link (or a token)
REPORTS = "/v1/runs/"  # /v1/runs/<project>/<run_id>: API Gateway hands the path as it was sent, percent-encoded
MAX_BODY = 256 * 1024  # metadata is a few KiB; bundles never pass through the API

logger = Logger()  # service name, level: POWERTOOLS_* environment
tracer = Tracer()


class _Resolver(APIGatewayHttpResolver):
    """Routes take ``<project>``: ``owner/repo`` or GitLab's ``group/subgroup/.../repo``, slashes
    and all (powertools' own parameters stop at a slash)."""

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}$"):
        compiled = APIGatewayHttpResolver._compile_regex(rule.replace("<project>", "PROJECT").replace("<page>", "PAGE"),
                                                         base_regex)
        return re.compile(compiled.pattern.replace("PROJECT", rf"(?P<project>{SEGMENT}(?:/{SEGMENT})+)")
                          .replace("PAGE", r"(?P<page>[A-Za-z0-9_.:+~%/-]+)"))


app = _Resolver(enable_validation=True)


def _allow(project: str) -> None:
    principal: Principal = app.context["principal"]
    principal.allow(project)


def _check_attempt(run_id: str) -> None:
    """A run id read from a path names no attempt, or one that can be: else a 422 that says what is
    wrong with it (an odd suffix is a sentence, never a 500)."""
    if problem := attempt_problem(run_id):
        raise Unprocessable(f"run id {problem}")


def _json(status: int, body):
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


@app.exception_handler(Refused)
def _refused(exc: Refused):
    retry_after = getattr(exc, "retry_after", None)  # the same request will be taken then
    return Response(status_code=exc.status, content_type=content_types.APPLICATION_JSON, body={"error": str(exc)},
                    headers={"Retry-After": str(retry_after)} if retry_after else None)


# What AWS answers when it is busy or failing, not when a request is wrong: after botocore's own
# retries (standard mode: 5 retries, 6 attempts) the caller is told to come back, never given a 500.
_TRANSIENT = {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
              "ThrottlingError", "SlowDown", "RequestTimeout", "InternalServerError", "ServiceUnavailable",
              "InternalError"}


@app.exception_handler([ClientError, AwsConnectionError, Busy])
def _busy(exc: Exception):
    if isinstance(exc, ClientError):
        error, status = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if error.get("Code") not in _TRANSIENT and status < 500:
            raise exc  # a fault of the stack's own (an access denied): the API's error alarm should see it
        why = f"{error.get('Code') or status} on {exc.operation_name}"
    else:
        why = str(exc)
    logger.warning("answered 503: a dependency still failed after its retries", extra={"why": why})
    return Response(status_code=HTTPStatus.SERVICE_UNAVAILABLE, content_type=content_types.APPLICATION_JSON,
                    headers={"Retry-After": "5"},
                    body=json.dumps({"error": f"the aggregator's storage is busy ({why}): send the request again "
                                              "in a few seconds"}))


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
    _allow(request.project)
    grant = api().uploads.grant(request)
    logger.info("upload granted", extra={"project": request.project, "run_id": request.run_id, "shard": request.shard})
    return _json(HTTPStatus.CREATED, grant.model_dump())


@app.post("/upload")
def drop_in_upload(metadata: UploadMetadata):
    _allow(metadata.project or "")
    headers = app.current_event.headers  # what goes upstream, as it came; its OIDC token verified, as the principal
    sent = SentPost(_raw_body(), headers.get("user-agent"), *(job_token(headers.get("authorization")) or (None, 0)))
    return _json(HTTPStatus.OK, api().uploads.accept_drop_in(metadata, sent).model_dump())


@app.post("/v1/runs/open")
def open_run(request: OpenRequest):
    _allow(request.project)
    answer = api().opening.open(request)
    return _json(HTTPStatus.OK, answer.model_dump())


@app.post("/v1/runs/close")
def close_run(request: CloseRequest):
    _allow(request.project)
    answer = api().closing.close(request)
    return _json(HTTPStatus.ACCEPTED, answer.model_dump())


@app.get("/v1/runs/<project>/<run_id>", compress=True)  # gzipped when asked (Accept-Encoding): a shard's page can be MBs
def read_report(project: str, run_id: str, format: Annotated[str, Query(pattern="^(json|markdown)$")] = "json",
                shard: Annotated[str | None, Query(pattern=SHARD_KEY_PATTERN)] = None):
    """The run's report (a summary whatever its size), or with ``shard`` every benchmark of that shard."""
    _allow(project)
    if "%" in run_id:  # left encoded by ``report_path``: a '/' (or a '%') is in no run id
        raise Unprocessable(f"run id {unquote(run_id)!r} is not a run id: it holds '/' or '%'")
    _check_attempt(run_id)
    reports = api().reports
    if shard is not None:
        return _bounded(project, reports.shard_benchmarks(project, run_id, shard))
    report = reports.report(project, run_id)
    body = render_markdown(report) if format == "markdown" else report.model_dump_json()
    if len(body.encode()) > api().settings.report_inline_bytes and (link := reports.report_link(project, run_id, format)):
        # over what Lambda may answer (6 MB): the published report itself, from S3
        return Response(status_code=HTTPStatus.SEE_OTHER, headers={"Location": link}, body="")
    if format == "markdown":
        return Response(status_code=200, content_type="text/markdown; charset=utf-8", body=body)
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


@app.get("/v1/costs", compress=True)
def benchmark_costs(project: Annotated[str, Query(pattern=PROJECT_PATTERN)],
                    branch: Annotated[str | None, Query(max_length=255)] = None,
                    run_id: Annotated[str | None, Query(pattern=RUN_ID_PATTERN)] = None):
    """What each benchmark of the branch's latest forwarded run cost, in seconds; for a run's split,
    the costs its first split used."""
    _allow(project)
    return _bounded(project, api().costs.latest(project, branch, run_id))


def _bounded(project: str, answer: BaseModel) -> Response:
    """``answer`` as JSON; over what Lambda may send (6 MB), a 303 to a presigned copy of it in S3."""
    body = answer.model_dump_json()
    if len(body.encode()) > api().settings.report_inline_bytes:
        return Response(status_code=HTTPStatus.SEE_OTHER, headers={"Location": api().reports.answer_link(project, body)},
                        body="")
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


# -- pages: a project's runs, and a run's page ------------------------------------------------

def _html(status: int, body: str) -> Response:
    return Response(status_code=status, content_type="text/html; charset=utf-8", body=body,
                    headers={"Cache-Control": "private, no-store", "X-Content-Type-Options": "nosniff",
                             "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                                        "script-src 'unsafe-inline'; connect-src 'self'; img-src 'self'"})


def _query() -> dict[str, str]:
    return {k: v for k, v in (app.current_event.query_string_parameters or {}).items()}


def _base_url() -> str:
    """Where this API answers, as the request reached it (or as configured)."""
    context = app.current_event.request_context
    host = app.current_event.headers.get("host") or context.domain_name
    scheme = app.current_event.headers.get("x-forwarded-proto", "https")
    return settings().public_url or f"{scheme}://{host}"


def _page_access(project: str, run_id: str) -> None:
    """A signed link for this page, or a token for its project (Authorization header)."""
    query = _query()
    if query.get("sig") or not app.current_event.headers.get("authorization"):
        check_page_link(api().page_key, project, run_id, query.get("expires"), query.get("sig"), time.time())
        return
    _principal(app.current_event.headers.get("authorization")).allow(project)


def _principal(authorization: str | None) -> Principal:
    """Who a token is: the operator's, a project's, or a GitHub Actions OIDC token's repository."""
    verifier = oidc()
    return authenticate(authorization, api_token(), api().tokens.project_of,
                        verifier.repository if verifier else None)


@app.get("/runs/<page>")
def page(page: str):
    """``/runs/{project}``: its latest runs; ``/runs/{project}/{run_id}``: the run. A GitLab
    project's path has slashes of its own: the run is tried first, then the list."""
    path = unquote(page).strip("/")
    if not re.fullmatch(rf"{SEGMENT}(?:/{SEGMENT})+(?:/[A-Za-z0-9_.:+~-]+)?", path):
        return _json(HTTPStatus.NOT_FOUND, {"error": f"no page at /runs/{page}"})
    project, _, run_id = path.rpartition("/")
    if is_project(project) and _is_run_page(project, run_id):
        return _run_page(project, run_id)
    if not is_project(path):
        return _json(HTTPStatus.NOT_FOUND, {"error": f"no page at /runs/{page}"})
    _page_access(path, "")
    reports, base, query = api().reports, _base_url(), _query()
    until = int(query["expires"]) if query.get("sig") else None  # a list's links never outlive the link it came by
    runs = [(run, reports.page_url(path, run.run_id, base, until)) for run in reports.recent_runs(path)]
    return _html(HTTPStatus.OK, render_list(path, runs))


def _is_run_page(project: str, run_id: str) -> bool:
    """Whether ``project``/``run_id`` names a run, or is a GitLab project's path (its list)."""
    if not is_project(f"{project}/{run_id}"):
        return True  # no project segment looks like that: a run id
    query = _query()
    if query.get("sig"):  # a signed link says which page it opens
        return signed_for(api().page_key, project, run_id, query.get("expires"), query["sig"])
    authorization = app.current_event.headers.get("authorization")
    if authorization and _principal(authorization).project == f"{project}/{run_id}":
        return False  # the token's own project: its list, whatever run a shorter project has of that name
    return api().reports.has_run(project, run_id)


def _run_page(project: str, run_id: str) -> Response:
    _page_access(project, run_id)
    _check_attempt(run_id)
    reports, query = api().reports, _query()
    report = reports.report(project, run_id)
    if query.get("format") == "json":
        return _json(HTTPStatus.OK, report.model_dump(mode="json"))
    shard = reports.shard_benchmarks(project, run_id, query["shard"]) if query.get("shard") else None  # all its benchmarks
    base = _base_url()
    refresh = "?" + urlencode({**{k: v for k, v in query.items() if k != "format"}, "format": "fragment"})
    # A run's signed link opens that run only: the list is linked for a token's holder.
    list_url = None if query.get("sig") else f"{base}/runs/{project}"
    if query.get("format") == "fragment":
        return _html(HTTPStatus.OK, render_main(report, query, refresh, list_url, shard))
    return _html(HTTPStatus.OK, render_run(report, query, refresh, list_url, shard))


def _raw_body() -> bytes:
    body = app.current_event.decoded_body or ""
    return body.encode() if isinstance(body, str) else body


def _signature() -> str | None:
    return app.current_event.headers.get("x-hub-signature-256")


def _parse(model: type[BaseModel], raw: bytes) -> BaseModel:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors())
        raise Unprocessable(f"invalid webhook body: {fields}") from exc


@app.post("/webhooks/refresh")
def refresh_webhook():
    raw = _raw_body()
    check_signature(raw, _signature(), webhook_secret())  # nothing is parsed before
    request = _parse(RefreshRequest, raw)
    check_fresh(request.timestamp, time.time())
    report = api().reports.refresh(request.project, request.run_id)
    return _json(HTTPStatus.OK, {"project": report.project, "run_id": report.run_id, "version": report.version})


@app.post("/webhooks/github")
def github_webhook():
    raw = _raw_body()
    project = check_github_signature(raw, _signature(), webhook_secret())
    kind = app.current_event.headers.get("x-github-event", "")
    if kind == "ping":
        return _json(HTTPStatus.OK, {"message": "pong"})
    if kind != "workflow_run":
        return _json(HTTPStatus.ACCEPTED, {"ignored": f"event {kind or '(none)'}"})
    event = _parse(WorkflowRunEvent, raw)
    if event.action != "completed":
        return _json(HTTPStatus.ACCEPTED, {"ignored": f"workflow_run {event.action}"})
    closed = api().closing.close_finished_ci_run(project, str(event.workflow_run.id))
    return _json(HTTPStatus.OK, {"closed": closed})


def report_path(raw: str) -> str:
    """A report's path decoded once: the project whole (GitLab's ``group%2Fsub%2Frepo``), the run id
    too unless it would hold a '/' (left encoded, and refused by the route: a run id names no path)."""
    head, _, run_id = raw.removeprefix(REPORTS).rpartition("/")
    decoded = unquote(run_id)
    return f"{REPORTS}{unquote(head)}/{run_id if '/' in decoded else decoded}"


def app_body(event: dict) -> str:
    body = event.get("body") or ""
    return base64.b64decode(body).decode("utf-8", "replace") if event.get("isBase64Encoded") else body


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context) -> dict:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    path = event.get("rawPath") or event.get("requestContext", {}).get("http", {}).get("path", "")
    body = event.get("body") or ""
    if len(body) > MAX_BODY * (4 / 3 if event.get("isBase64Encoded") else 1):
        return {"statusCode": 413, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                "body": json.dumps({"error": f"request body over {MAX_BODY} bytes: bundles go to the upload URL, not the API"})}
    try:
        if path.startswith(PAGES):
            pass  # a signed link or a token: the page checks which (_page_access)
        elif path == "/upload" and not headers.get("authorization"):
            app.append_context(principal=tokenless(app_body(event), settings().tokenless_projects))
        elif not path.startswith(WEBHOOKS):
            app.append_context(principal=_principal(headers.get("authorization")))
    except Refused as exc:
        return {"statusCode": exc.status, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                "body": json.dumps({"error": str(exc)})}
    if path.startswith(REPORTS) and "%" in path:
        event = {**event, "rawPath": report_path(path)}
    return app.resolve(event, context)
