"""What the API's routers share: the resolver that reads a project's path, JSON and HTML answers,
the request's raw body, who a token is, and a run id read from a path."""

import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from codspeed_rules.names import SEGMENT, attempt_problem

from .. import wiring
from ..auth import Principal, authenticate
from ..domain.errors import Unprocessable


class Resolver(APIGatewayHttpResolver):
    """Routes take ``<project>``: ``owner/repo`` or GitLab's ``group/subgroup/.../repo``, slashes
    and all (powertools' own parameters stop at a slash)."""

    # No public hook exists: powertools' dynamic parameters stop at '/', and a route's own regular
    # expression cannot name a group (its ``<name>`` is rewritten as a parameter of its own).
    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}$") -> re.Pattern[str]:
        compiled = APIGatewayHttpResolver._compile_regex(
            rule.replace("<project>", "PROJECT").replace("<page>", "PAGE"), base_regex
        )
        return re.compile(
            compiled.pattern.replace("PROJECT", rf"(?P<project>{SEGMENT}(?:/{SEGMENT})+)").replace(
                "PAGE", r"(?P<page>[A-Za-z0-9_.:+~%/-]+)"
            )
        )


JsonResponse = Response[dict[str, Any]]  # a route's JSON answer: powertools serializes the body


def json_response(status: int, body: dict[str, Any]) -> JsonResponse:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


def raw_body(router: APIGatewayHttpRouter) -> bytes:
    body = router.current_event.decoded_body or ""
    return body.encode() if isinstance(body, str) else body


def principal(authorization: str | None) -> Principal:
    """Who a token is: the operator's, a project's, or a GitHub Actions OIDC token's repository."""
    verifier = wiring.oidc()
    return authenticate(
        authorization,
        wiring.api_token(),
        wiring.for_api().project_tokens.project_of,
        verifier.repository if verifier else None,
    )


def check_attempt(run_id: str) -> None:
    """A run id read from a path names no attempt, or one that can be: else a 422 that says what is
    wrong with it (an odd suffix is a sentence, never a 500)."""
    if problem := attempt_problem(run_id):
        raise Unprocessable(f"run id {problem}")
