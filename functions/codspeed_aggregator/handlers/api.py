"""The HTTP API's Lambda handler: bounds the body, says who calls, and hands the request to its
router: the JSON API (``runs_api``), the pages (``pages``) or the webhooks (``webhooks``)."""

import base64
import json
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from botocore.exceptions import ConnectionError as AwsConnectionError

from codspeed_rules.runner_json import DuplicateKey, NotSerdeJson, read

from ..auth import Principal
from ..aws_faults import transient
from ..domain.errors import Busy, HostFailed, Refused
from ..wiring import API, load
from . import pages, runs_api, webhooks
from .http import JsonResponse, Resolver, json_response, principal

WEBHOOKS = "/webhooks/"  # signed instead of carrying the API token
PAGES = "/runs/"  # opened by a signed link (or a token)
REPORTS = "/v1/runs/"  # /v1/runs/<project>/<run_id>: API Gateway hands the path as it was sent, percent-encoded
MAX_BODY = 256 * 1024  # metadata is a few KiB; bundles never pass through the API

logger = Logger()  # service name, level: POWERTOOLS_* environment
load(API)


app = Resolver(enable_validation=True)
for _router in (runs_api.router, pages.router, webhooks.router):
    app.include_router(_router)


@app.exception_handler(Refused)
def _refused(exc: Refused) -> JsonResponse:
    return Response(status_code=exc.status, content_type=content_types.APPLICATION_JSON, body={"error": str(exc)})


@app.exception_handler([ClientError, AwsConnectionError, Busy])
def _busy(exc: Exception) -> JsonResponse:
    if isinstance(exc, ClientError):
        error, status = exc.response.get("Error", {}), exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if not transient(exc):  # after botocore's own retries (standard mode: 6 attempts), come back
            raise exc  # a fault of the stack's own (an access denied): the API's error alarm should see it
        why = f"{error.get('Code') or status} on {exc.operation_name}"
    else:
        why = str(exc)
    logger.warning("answered 503: a dependency still failed after its retries", extra={"why": why})
    return Response(
        status_code=HTTPStatus.SERVICE_UNAVAILABLE,
        content_type=content_types.APPLICATION_JSON,
        headers={"Retry-After": "5"},
        body={"error": f"the aggregator's storage is busy ({why}): send the request again in a few seconds"},
    )


@app.exception_handler(HostFailed)
def _host_failed(exc: HostFailed) -> JsonResponse:
    logger.warning("answered 502: a host asked on the caller's behalf failed", extra={"why": str(exc)})
    return Response(
        status_code=HTTPStatus.BAD_GATEWAY,
        content_type=content_types.APPLICATION_JSON,
        headers={"Retry-After": "60"},
        body={"error": str(exc)},
    )


@app.exception_handler(RequestValidationError)
def _invalid(exc: RequestValidationError) -> JsonResponse:
    detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    fields = "; ".join(_field(d) for d in detail)
    return json_response(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": f"invalid request: {fields}", "detail": detail})


def _field(detail: dict[str, Any]) -> str:
    if detail["type"] == "json_invalid":
        return "body: not valid JSON"
    return f"{'.'.join(str(p) for p in detail['loc'][1:]) or 'body'}: {detail['msg']}"


def body_refusal(event: dict[str, Any]) -> tuple[int, str] | None:
    """A body the API reads one way only, before any route: at most ``MAX_BODY`` bytes, UTF-8 (API
    Gateway hands over another base64-encoded), and JSON as serde_json reads it (``runner_json.read``:
    no key twice in one object, no NaN or Infinity, no number past f64's range, no lone surrogate):
    what is kept and forwarded as bytes must mean one thing to every reader. The status and
    sentence of a refusal, else None."""
    body = event.get("body") or ""
    raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode()
    if len(raw) > MAX_BODY:
        return 413, f"request body over {MAX_BODY} bytes: bundles go to the upload URL, not the API"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return 400, f"request body is not UTF-8 (byte {exc.start} is {raw[exc.start]:#04x}): send JSON in UTF-8"
    if text.lstrip()[:1] in ("{", "["):
        try:
            read(text)
        except DuplicateKey as exc:
            return 422, f"request body names {exc.key!r} twice in one object: a body is read one way only"
        except NotSerdeJson as exc:
            return 422, f"request body at {exc}: a body is read as CodSpeed's runner reads it"
        except ValueError:
            pass  # not JSON: the route says what it expected
    return None


def _answer(status: int, error: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": content_types.APPLICATION_JSON},
        "body": json.dumps({"error": error}),
    }


def report_path(raw: str) -> str:
    """A report's path decoded once: the project whole (GitLab's ``group%2Fsub%2Frepo``), the run id
    too unless it would hold a '/' (left encoded, and refused by the route: a run id names no path)."""
    head, _, run_id = raw.removeprefix(REPORTS).rpartition("/")
    decoded = unquote(run_id)
    return f"{REPORTS}{unquote(head)}/{run_id if '/' in decoded else decoded}"


def _caller(path: str, authorization: str | None) -> Principal | None:
    """Who calls a route that takes a token (None: a page or a webhook, which check their own)."""
    if path.startswith((PAGES, WEBHOOKS)):  # a page: a signed link or a token (_page_access); a webhook: signed
        return None
    if not authorization:
        return Principal(None, anonymous=True)  # a fork's pull request, or refused by its route
    return principal(authorization)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    path = event.get("rawPath") or event.get("requestContext", {}).get("http", {}).get("path", "")
    if refused := body_refusal(event):
        return _answer(*refused)
    try:
        if (caller := _caller(path, headers.get("authorization"))) is not None:
            app.context["principal"] = caller
    except Refused as exc:
        return _answer(exc.status, str(exc))
    if path.startswith(REPORTS) and "%" in path:
        event = {**event, "rawPath": report_path(path)}
    return app.resolve(event, context)
