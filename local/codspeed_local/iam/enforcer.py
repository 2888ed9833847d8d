"""Every AWS call a function makes, held against its role before it is sent, and refused with
AccessDenied as AWS refuses it.

A call is the function's whose boto3 session makes it (``adapters.aws.session``): each
Lambda function has its own. The operator's session (the local stack's set-up, tests driving
use cases by hand) has no role: its calls made inside a use case are held against the role of
the function that runs that use case in AWS (``USE_CASE_FUNCTIONS``), the rest are not held."""

import sys
import threading
from collections import Counter

from botocore.awsrequest import AWSResponse

from codspeed_aggregator.adapters.aws import OPERATOR

from .calls import needs
from .policy import ALLOWED, Need, Policy
from .roles import ACCOUNT, REGION

FUNCTIONS = {
    "api": "ApiFunction",
    "arrivals": "ArrivalsFunction",
    "finalizer": "FinalizerFunction",
    "sweeper": "SweeperFunction",
}
_USE_CASES = "codspeed_aggregator.use_cases."
# use case module (or module.function) -> the template's function that runs it
# (every module of use_cases/ is here: tests/unit/test_iam.py holds it)
USE_CASE_FUNCTIONS = {
    "request_upload": "ApiFunction",
    "runner_upload": "ApiFunction",
    "give_back_upload": "ApiFunction",
    "open_run": "ApiFunction",
    "reports": "ApiFunction",
    "close_run": "ApiFunction",
    "benchmark_costs": "ApiFunction",
    "sweep_deadlines": "SweeperFunction",
    "record_arrival": "ArrivalsFunction",
    "finalize_run": "FinalizerFunction",
    "forward_part": "FinalizerFunction",
    "forward_shard": "FinalizerFunction",
    "keep_sources": "FinalizerFunction",
    "merge_bases": "FinalizerFunction",
    "fork_pull_requests": "ApiFunction",
    # helpers of the use cases above, never the outermost in a function: held to the role of the one calling
    "project_tokens": None,
    "plan_forward": None,
    "bundle_validation": None,
    "aggregator": None,  # builds the use cases, calls nothing
}
_JSON_SERVICES = {"dynamodb", "sqs", "ssm"}


def acting_function() -> str | None:
    """The function whose use case this thread is in: the outermost use case on the stack."""
    frame, outermost = sys._getframe(1), None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith(_USE_CASES):
            outermost = (module.removeprefix(_USE_CASES), frame.f_code.co_name)
        frame = frame.f_back
    if outermost is None:
        return None
    module, name = outermost
    return USE_CASE_FUNCTIONS.get(f"{module}.{name}", USE_CASE_FUNCTIONS.get(module))


def resource_family(resource: str) -> str:
    """An object's ARN as its key prefix (``bucket/reports/*``), a per-project SSM parameter's as its
    path (``parameter/codspeed-aggregator/upstream-tokens/*``): what a role grants, what a report lists."""
    if resource.startswith("arn:aws:s3:::") and "/" in resource:
        bucket, _, key = resource.removeprefix("arn:aws:s3:::").partition("/")
        return f"arn:aws:s3:::{bucket}/{key.split('/', 1)[0]}/*"
    if resource.startswith("arn:aws:ssm:") and ":parameter/" in resource:
        head, _, name = resource.partition(":parameter/")
        if name.count("/") >= 2:
            return f"{head}:parameter/{'/'.join(name.split('/')[:2])}/*"
    return resource


class RoleEnforcer:
    def __init__(self, policies: dict[str, Policy], parameters_key: str | None = None) -> None:
        self.policies = policies
        self.parameters_key = parameters_key
        self.seen: Counter = Counter()  # (function, action, resource family, verdict) -> calls
        self._denied_presigns: dict[str, str] = {}  # /bucket/key last presigned by a role that may not: why
        self._lock = threading.Lock()

    def attach(self, function: str, session) -> None:
        """Hold every client made from ``session`` (of ``function``) to its role."""
        role = FUNCTIONS.get(function)
        if role is None and function != OPERATOR:
            return
        session.events.register("before-parameter-build", lambda **kw: self._check(role, **kw))
        session.events.register("before-call", self._refuse)
        session.events.register("after-call.s3", lambda **kw: self._hide_absence(role, **kw))

    def _check(self, role: str | None, params: dict, model, context: dict, **_) -> None:
        role = role or acting_function()
        if role is None:
            return
        service = model.service_model.service_name
        if service == "s3" and "Bucket" in params:
            context["iam_bucket"] = params["Bucket"]  # an absent key's answer depends on the role's ListBucket
        if context.get("is_presign_request"):  # the latest presign of a key decides (keys are one per upload)
            self._denied_presigns.pop(f"/{params['Bucket']}/{params['Key']}", None)
        for need in needs(service, model.name, params, REGION, ACCOUNT, self.parameters_key):
            verdict = self.policies[role].decide(need)
            with self._lock:
                self.seen[(role, need.action, resource_family(need.resource), verdict)] += 1
            if verdict == ALLOWED:
                continue
            if context.get("is_presign_request"):  # nothing is sent now: the URL is refused when used
                self._denied_presigns[f"/{params['Bucket']}/{params['Key']}"] = _refusal(role, need, verdict, service)[
                    1
                ]["Error"]["Message"]
            else:
                context["iam_refusal"] = _refusal(role, need, verdict, service)
            return

    def _hide_absence(self, role: str | None, parsed: dict, model, context: dict, **_) -> None:
        """S3 answers a read of a key that does not exist 403 AccessDenied, not 404 NoSuchKey, to
        whoever may not list the bucket (s3:ListBucket, whose s3:prefix conditions a GetObject
        request does not carry): a role may not learn what it cannot list."""
        role = role or acting_function()
        if role is None or model.name not in ("GetObject", "HeadObject"):
            return
        error = parsed.get("Error") or {}
        if error.get("Code") not in ("NoSuchKey", "404"):
            return
        bucket = f"arn:aws:s3:::{context.get('iam_bucket')}"
        if self.policies[role].decide(Need("s3:ListBucket", bucket, {})) == ALLOWED:
            return
        parsed["Error"] = {"Code": "AccessDenied", "Message": "Access Denied"}
        parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 403

    def add(self, policies: dict[str, Policy]) -> None:
        """Another deployment of the template beside the first (its own table, bucket, queues):
        each function's role reaches both, as two stacks' roles would each reach their own."""
        for role, policy in policies.items():
            known = self.policies.get(role)
            self.policies[role] = Policy([*(known.statements if known else []), *policy.statements])

    def presign_refusal(self, path: str) -> str | None:
        """Why S3 refuses a request to ``path`` (``/bucket/key``) made with a presigned URL, or None."""
        return self._denied_presigns.get(path)

    @staticmethod
    def _refuse(context: dict, **_):
        return context.get("iam_refusal")

    def report(self) -> list[str]:
        """One line per (function, action, resource) seen, with its verdict and how many calls."""
        return [
            f"{role:18} {action:32} {resource}  {verdict} x{count}"
            for (role, action, resource, verdict), count in sorted(self.seen.items())
        ]

    def refusals(self) -> list[tuple]:
        return [key for key in self.seen if key[3] != ALLOWED]


def _refusal(role: str, need: Need, verdict: str, service: str):
    why = (
        "with an explicit deny in an identity-based policy"
        if verdict == "denied"
        else f"because no identity-based policy allows the {need.action} action"
    )
    message = (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/{role}Role/{role} is not authorized to perform: "
        f"{need.action} on resource: {need.resource} {why}"
    )
    code, status = ("AccessDeniedException", 400) if service in _JSON_SERVICES else ("AccessDenied", 403)
    return AWSResponse(f"https://{service}.{REGION}.amazonaws.com", status, {}, None), {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
