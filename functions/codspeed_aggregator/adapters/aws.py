"""boto3 clients, one session per Lambda function (each function its own credentials: its role).
``AWS_ENDPOINT_URL`` points them at the local stack."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3
import botocore.session
from botocore.config import Config
from botocore.loaders import Loader, create_loader

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from aws_lambda_powertools.utilities.parameters import SSMProvider
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_ssm import SSMClient

_CONFIG = Config(signature_version="s3v4", retries={"mode": "standard", "max_attempts": 5})
OPERATOR = "operator"  # the operator's commands and the local stack's set-up: no function's role

_LOCK = threading.Lock()
_SESSION_HOOKS: list[Callable[..., Any]] = []  # called with (function, session) as each session is made


def on_session(hook: Callable[..., Any]) -> Callable[[], None]:
    """Have ``hook(function, session)`` see every session made from now on (the local stack holds
    each function's calls to its role there); answers what takes the hook off again."""
    _SESSION_HOOKS.append(hook)
    return lambda: _SESSION_HOOKS.remove(hook)


@overload
def client(service: Literal["dynamodb"], function: str = OPERATOR) -> DynamoDBClient: ...
@overload
def client(service: Literal["s3"], function: str = OPERATOR) -> S3Client: ...
@overload
def client(service: Literal["sqs"], function: str = OPERATOR) -> SQSClient: ...
@overload
def client(service: Literal["ssm"], function: str = OPERATOR) -> SSMClient: ...
def client(service: str, function: str = OPERATOR) -> Any:
    """One client per function and service. Made under a lock: two threads asking at once (the
    local stack's pollers and gateway) would otherwise each make one, and hold different clients."""
    with _LOCK:
        return _client(function, service)


@cache
def _data_loader(data_path: str | None) -> Loader:
    """botocore's service models and endpoints, read once for every session of the process: each
    session would read its own (the local stack and the tests hold one session per function)."""
    return create_loader(data_path)


@cache
def session(function: str) -> boto3.session.Session:
    core = botocore.session.get_session()
    loader = _data_loader(core.get_config_variable("data_path"))
    core.register_component("data_loader", loader)
    made = boto3.session.Session(botocore_session=core)
    loader.search_paths[:] = dict.fromkeys(loader.search_paths)  # boto3 adds its folder at each session
    for hook in _SESSION_HOOKS:
        hook(function, made)
    return made


@cache
def _client(function: str, service: str) -> Any:
    return session(function).client(service, config=_CONFIG)  # type: ignore[call-overload]  # any service


def cache_clear() -> None:
    _client.cache_clear()
    session.cache_clear()
    _parameters.cache_clear()


@cache
def _parameters(function: str) -> SSMProvider:
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto3_client=client("ssm", function))


def secret(value: str | None, parameter: str | None, function: str = OPERATOR) -> str | None:
    """A secret given directly (local stack, tests) or by SSM parameter name (deployed), read
    with the function's own client and cached for five minutes."""
    if value or not parameter:
        return value
    found = _parameters(function).get(parameter, decrypt=True, max_age=300)
    return found if isinstance(found, str) or found is None else str(found)  # a String or SecureString parameter


def secret_if_set(value: str | None, parameter: str | None, function: str = OPERATOR) -> str | None:
    """``secret``, or None when its parameter was never created: a setting the operator may leave
    out. Any other failure (throttled, denied, a KMS error) is raised."""
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    try:
        return secret(value, parameter, function)
    except GetParameterError as exc:
        if not parameter_missing(exc):
            raise
        return None


def parameter_missing(exc: Exception) -> bool:
    """powertools wraps every SSM failure in GetParameterError; its cause says whether the parameter
    does not exist."""
    from botocore.exceptions import ClientError

    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") == "ParameterNotFound"
