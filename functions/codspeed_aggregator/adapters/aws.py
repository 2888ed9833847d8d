"""boto3 clients, one session per Lambda function (each function its own credentials: its role).
``AWS_ENDPOINT_URL`` points them at the local stack."""

import threading
from functools import cache

import boto3
from botocore.config import Config

_CONFIG = Config(signature_version="s3v4", retries={"mode": "standard", "max_attempts": 5})
OPERATOR = "operator"  # the operator's commands and the local stack's set-up: no function's role

_LOCK = threading.Lock()


def client(service: str, function: str = OPERATOR):
    """One client per function and service. Made under a lock: two threads asking at once (the
    local stack's pollers and gateway) would otherwise each make one, and hold different clients."""
    with _LOCK:
        return _client(function, service)


@cache
def session(function: str) -> boto3.session.Session:
    return boto3.session.Session()


@cache
def _client(function: str, service: str):
    return session(function).client(service, config=_CONFIG)


def cache_clear() -> None:
    _client.cache_clear()
    session.cache_clear()
    _parameters.cache_clear()


@cache
def _parameters(function: str):
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto3_client=client("ssm", function))


def secret(value: str | None, parameter: str | None, function: str = OPERATOR) -> str | None:
    """A secret given directly (local stack, tests) or by SSM parameter name (deployed), read
    with the function's own client and cached for five minutes."""
    if value or not parameter:
        return value
    return _parameters(function).get(parameter, decrypt=True, max_age=300)
