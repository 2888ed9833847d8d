"""The JSON API: request uploads, CodSpeed's drop-in ``POST /upload``, open and close runs, read
reports and costs. Each route checks who calls (``router.context["principal"]``) before it acts."""

from collections.abc import Callable
from http import HTTPStatus
from typing import Annotated, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import BaseModel

from codspeed_rules.names import PROJECT_PATTERN, RUN_ID_PATTERN, SHARD_KEY_PATTERN
from codspeed_wire.api import CloseRequest, GiveBackRequest, OpenRequest, ShardUploadRequest
from codspeed_wire.markdown import render_markdown
from codspeed_wire.upstream import UploadMetadata

from .. import wiring
from ..auth import Principal, job_attempt, job_token
from ..domain.closing import CiOrigin
from ..domain.drop_in import BuildkiteJob
from ..domain.errors import AttemptEnded, Unprocessable
from ..domain.records import SentPost
from ..use_cases.give_back_upload import upload_named
from .http import JsonResponse, check_attempt, json_response, raw_body

router = APIGatewayHttpRouter()
logger = Logger(child=True)  # the handler's logger: its service and its Lambda context
T = TypeVar("T")


def _allow(project: str, run_id: str | None = None) -> None:
    """The caller's token is good for ``project``; without a token, ``run_id`` is a fork's pull request's run."""
    principal: Principal = router.context["principal"]
    if principal.anonymous and run_id is not None:
        wiring.for_api().fork_pull_requests.admit_run(project, run_id)
    else:
        principal.allow(project)


def _fork(  # noqa: PLR0913 -- the claim, where it comes from, and whether GitHub is asked again
    project: str,
    metadata: UploadMetadata | None,
    ref: str | None,
    commit: str | None,
    run_id: str,
    required: bool = True,
    fresh: bool = False,
) -> CiOrigin | None:
    """The Actions run and attempt GitHub vouched for when the caller, with no token, is a fork's pull
    request as GitHub bears it out; a token's holder is checked as any other (None)."""
    principal: Principal = router.context["principal"]
    if not principal.anonymous or (metadata is not None and not metadata.tokenless):
        principal.allow(project)  # without a token, what goes upstream says so, as the runner's metadata does
        return None
    provider = metadata.repository_provider if metadata is not None else "GITHUB"
    return wiring.for_api().fork_pull_requests.admit(
        project, ref, commit, run_id, required=required, provider=provider, fresh=fresh
    )


def _vouched(fork: Callable[[bool], CiOrigin | None], act: Callable[[CiOrigin | None], T]) -> T:
    """``act`` for the CI attempt a fork's request is vouched for; when that attempt's run has ended, GitHub
    is asked once more (what it said within the minute may be the attempt before a re-run began)."""
    origin = fork(False)
    try:
        return act(origin)
    except AttemptEnded:
        if origin is None or (fresh := fork(True)) == origin:
            raise
        return act(fresh)


@router.post("/v1/uploads")
def request_upload(request: ShardUploadRequest) -> JsonResponse:
    meta = request.metadata
    grant = _vouched(
        lambda fresh: _fork(request.project, meta, meta.ref, meta.commit_hash, request.run_id, fresh=fresh),
        lambda fork: wiring.for_api().request_upload.grant(request, fork=fork),
    )
    logger.info("upload granted", extra={"project": request.project, "run_id": request.run_id, "shard": request.shard})
    return json_response(HTTPStatus.CREATED, grant.model_dump())


@router.post("/v1/uploads/give-back")
def give_back_upload(request: GiveBackRequest) -> JsonResponse:
    """A grant its client will not use: only its grantee knows its key, a fork's without a token too."""
    project, run_id, _, _ = upload_named(request.key)  # who may give it back: the run's, a fork's without a token
    _allow(project, run_id)
    answer = wiring.for_api().give_back_upload.give_back(request.key, request.reason)
    logger.info("upload given back", extra={"project": project, "run_id": run_id, "state": answer.state})
    return json_response(HTTPStatus.OK, answer.model_dump())


@router.post("/upload")
def drop_in_upload(metadata: UploadMetadata) -> JsonResponse:
    return _drop_in(metadata)


@router.post("/upload/buildkite/<build>/<step>/<job>/<index>/<count>")
def buildkite_drop_in_upload(  # noqa: PLR0913 -- the body, and each segment of the URL
    metadata: UploadMetadata, build: str, step: str, job: str, index: str, count: str
) -> JsonResponse:
    """A Buildkite job's runner, its upload URL naming what its upload does not: build, step, job."""
    return _drop_in(metadata, BuildkiteJob.from_path(build, step, index, count, job))


@router.post("/upload/buildkite/<build>/<step>/<index>/<count>")
def buildkite_drop_in_upload_unnamed(
    metadata: UploadMetadata, build: str, step: str, index: str, count: str
) -> JsonResponse:
    """Release 1.0.0's URL, which names no job: taken as it was (the API keeps what it took)."""
    return _drop_in(metadata, BuildkiteJob.from_path(build, step, index, count))


def _drop_in(metadata: UploadMetadata, buildkite: BuildkiteJob | None = None) -> JsonResponse:
    run_id = metadata.run_part.run_id if metadata.run_part else ""
    headers = router.current_event.headers  # what goes upstream, as it came; its OIDC token verified, as the principal
    sent = SentPost(
        raw_body(router), headers.get("user-agent"), *(job_token(headers.get("authorization")) or (None, 0))
    )
    attempt = job_attempt(headers.get("authorization"))
    accepted = _vouched(
        lambda fresh: _fork(
            metadata.project or "", metadata, metadata.ref, metadata.commit_hash, run_id, required=False, fresh=fresh
        ),
        lambda fork: wiring.for_api().runner_upload.accept(
            metadata, sent, fork=fork, ci_attempt=attempt, buildkite=buildkite
        ),
    )
    return json_response(HTTPStatus.OK, accepted.model_dump())


@router.post("/v1/runs/open")
def open_run(request: OpenRequest) -> JsonResponse:
    fork = _fork(request.project, request.metadata, request.ref, request.commit, request.run_id)
    answer = wiring.for_api().open_run.open(request, fork=fork is not None)
    return json_response(HTTPStatus.OK, answer.model_dump())


@router.post("/v1/runs/close")
def close_run(request: CloseRequest) -> JsonResponse:
    _allow(request.project, request.run_id)
    if router.context["principal"].anonymous:  # anyone may say a fork's CI run: GitHub decides whether it ended
        wiring.for_api().fork_pull_requests.vouched_close(request)
    answer = wiring.for_api().close_run.close(request)
    return json_response(HTTPStatus.ACCEPTED, answer.model_dump())


@router.get(
    "/v1/runs/<project>/<run_id>", compress=True
)  # gzipped when asked (Accept-Encoding): a shard's page can be MBs
def read_report(
    project: str,
    run_id: str,
    format: Annotated[str, Query(pattern="^(json|markdown)$")] = "json",
    shard: Annotated[str | None, Query(pattern=SHARD_KEY_PATTERN)] = None,
) -> Response[str]:
    """The run's report (a summary whatever its size), or with ``shard`` every benchmark of that shard."""
    _allow(project, run_id)
    if "%" in run_id:  # left encoded by ``report_path``: a '/' (or a '%') is in no run id
        raise Unprocessable(f"run id {unquote(run_id)!r} is not a run id: it holds '/' or '%'")
    check_attempt(run_id)
    reports = wiring.for_api().reports
    if shard is not None:
        return _bounded(project, reports.shard_benchmarks(project, run_id, shard))
    report = reports.report(project, run_id)
    body = render_markdown(report) if format == "markdown" else report.model_dump_json()
    if len(body.encode()) > wiring.for_api().settings.report_inline_bytes and (
        link := reports.report_link(project, run_id)
        if format == "json"
        else reports.answer_link(project, body, markdown=True)
    ):
        # over what Lambda may answer (6 MB): the published report itself, from S3
        return Response(status_code=HTTPStatus.SEE_OTHER, headers={"Location": link}, body="")
    if format == "markdown":
        return Response(status_code=200, content_type="text/markdown; charset=utf-8", body=body)
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


@router.get("/v1/costs", compress=True)
def benchmark_costs(
    project: Annotated[str, Query(pattern=PROJECT_PATTERN)],
    branch: Annotated[str | None, Query(max_length=255)] = None,
    run_id: Annotated[str | None, Query(pattern=RUN_ID_PATTERN)] = None,
) -> Response[str]:
    """What each benchmark of the branch's latest forwarded run cost, in seconds; for a run's split,
    the costs its first split used."""
    _allow(project)
    return _bounded(project, wiring.for_api().benchmark_costs.latest(project, branch, run_id))


def _bounded(project: str, answer: BaseModel) -> Response[str]:
    """``answer`` as JSON; over what Lambda may send (6 MB), a 303 to a presigned copy of it in S3."""
    body = answer.model_dump_json()
    if len(body.encode()) > wiring.for_api().settings.report_inline_bytes:
        return Response(
            status_code=HTTPStatus.SEE_OTHER,
            headers={"Location": wiring.for_api().reports.answer_link(project, body)},
            body="",
        )
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)
