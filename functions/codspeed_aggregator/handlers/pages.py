"""The pages: a project's latest runs, and a run's page (live, its fragment refreshed), opened by
a signed link or with a token."""

import re
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlencode

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from codspeed_rules.names import SEGMENT, is_project

from .. import wiring
from ..auth import check_page_link, signed_for
from ..pages.run_page import render_list, render_main, render_run
from ..settings import settings
from .http import check_attempt, json_response, principal

router = APIGatewayHttpRouter()


def _html(status: int, body: str) -> Response[str]:
    return Response(
        status_code=status,
        content_type="text/html; charset=utf-8",
        body=body,
        headers={
            "Cache-Control": "private, no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; connect-src 'self'; img-src 'self'",
        },
    )


def _query() -> dict[str, str]:
    return {k: v for k, v in (router.current_event.query_string_parameters or {}).items()}


def _base_url() -> str:
    """Where this API answers, as the request reached it (or as configured)."""
    context = router.current_event.request_context
    host = router.current_event.headers.get("host") or context.domain_name
    scheme = router.current_event.headers.get("x-forwarded-proto", "https")
    return settings().public_url or f"{scheme}://{host}"


def _page_access(project: str, run_id: str) -> None:
    """A signed link for this page, or a token for its project (Authorization header)."""
    query = _query()
    if query.get("sig") or not router.current_event.headers.get("authorization"):
        check_page_link(wiring.for_api().page_key, project, run_id, query.get("expires"), query.get("sig"), time.time())
        return
    principal(router.current_event.headers.get("authorization")).allow(project)


@router.get("/runs/<page>")
def page(page: str) -> Response[Any]:  # powertools validates a body by its Response[...]: HTML or JSON
    """``/runs/{project}``: its latest runs; ``/runs/{project}/{run_id}``: the run. A GitLab
    project's path has slashes of its own: the run is tried first, then the list."""
    path = unquote(page).strip("/")
    if not re.fullmatch(rf"{SEGMENT}(?:/{SEGMENT})+(?:/[A-Za-z0-9_.:+~-]+)?", path):
        return json_response(HTTPStatus.NOT_FOUND, {"error": f"no page at /runs/{page}"})
    project, _, run_id = path.rpartition("/")
    if is_project(project) and _is_run_page(project, run_id):
        return _run_page(project, run_id)
    if not is_project(path):
        return json_response(HTTPStatus.NOT_FOUND, {"error": f"no page at /runs/{page}"})
    _page_access(path, "")
    reports, base, query = wiring.for_api().reports, _base_url(), _query()
    until = int(query["expires"]) if query.get("sig") else None  # a list's links never outlive the link it came by
    runs = [(run, reports.page_url(path, run.run_id, base, until)) for run in reports.recent_runs(path)]
    return _html(HTTPStatus.OK, render_list(path, runs))


def _is_run_page(project: str, run_id: str) -> bool:
    """Whether ``project``/``run_id`` names a run, or is a GitLab project's path (its list)."""
    if not is_project(f"{project}/{run_id}"):
        return True  # no project segment looks like that: a run id
    query = _query()
    if query.get("sig"):  # a signed link says which page it opens
        return signed_for(wiring.for_api().page_key, project, run_id, query.get("expires"), query["sig"])
    authorization = router.current_event.headers.get("authorization")
    if authorization and principal(authorization).project == f"{project}/{run_id}":
        return False  # the token's own project: its list, whatever run a shorter project has of that name
    return wiring.for_api().reports.has_run(project, run_id)


def _run_page(project: str, run_id: str) -> Response[Any]:
    _page_access(project, run_id)
    check_attempt(run_id)
    reports, query = wiring.for_api().reports, _query()
    report = reports.report(project, run_id)
    if query.get("format") == "json":
        return json_response(HTTPStatus.OK, report.model_dump(mode="json"))
    shard = (
        reports.shard_benchmarks(project, run_id, query["shard"]) if query.get("shard") else None
    )  # all its benchmarks
    base = _base_url()
    refresh = "?" + urlencode({**{k: v for k, v in query.items() if k != "format"}, "format": "fragment"})
    # A run's signed link opens that run only: the list is linked for a token's holder.
    list_url = None if query.get("sig") else f"{base}/runs/{project}"
    if query.get("format") == "fragment":
        return _html(HTTPStatus.OK, render_main(report, query, refresh, list_url, shard))
    return _html(HTTPStatus.OK, render_run(report, query, refresh, list_url, shard))
