"""boto3 clients, made once per process. ``AWS_ENDPOINT_URL`` points them at the local stack."""

import threading
from functools import cache

import boto3
from botocore.config import Config

_CONFIG = Config(signature_version="s3v4", retries={"mode": "standard", "max_attempts": 5})


_LOCK = threading.Lock()


def client(service: str):
    """One client per service. Made under a lock: two threads asking at once (the local stack's
    pollers and gateway) would otherwise each make one, and hold different clients."""
    with _LOCK:
        return _client(service)


@cache
def _client(service: str):
    return boto3.session.Session().client(service, config=_CONFIG)


client.cache_clear = _client.cache_clear


def secret(value: str | None, parameter: str | None) -> str | None:
    """A secret given directly (local stack, tests) or by SSM parameter name (deployed)."""
    if value or not parameter:
        return value
    from aws_lambda_powertools.utilities.parameters import get_parameter

    return get_parameter(parameter, decrypt=True, max_age=300)
