"""moto, quicker where the suite measured it slow, each shortcut giving moto's own answers
(``tests/integration/test_moto_server.py`` and ``test_moto_speedups.py`` compare them). Calls to the stack's moto are
serialized (``moto_server``): a shortcut may swap a module's or an object's attribute for one call."""

import functools

from .moto_dynamodb import (
    dynamodb_answers_as_json,
    dynamodb_item_by_item,
    dynamodb_values_sized_in_place,
)
from .moto_update_checks import update_expressions_checked_once, update_expressions_parsed_once


def speed_up_moto() -> None:
    dynamodb_item_by_item()
    update_expressions_checked_once()
    update_expressions_parsed_once()
    dynamodb_answers_as_json()
    _s3_versions_under_prefix()
    _sqs_retention_read_once()
    _list_moto_modules_once()
    _response_methods_listed_once()
    dynamodb_values_sized_in_place()


def _list_moto_modules_once() -> None:
    """moto's dispatcher lists its own package's folders on disk at every request to tell a
    service from a host name; the pollers' short polls made that a tenth of the stack's time."""
    from moto import backends

    if getattr(backends.list_of_moto_modules, "listed_once", False):
        return
    modules = tuple(backends.list_of_moto_modules())

    def listed() -> tuple[str, ...]:
        return modules

    listed.listed_once = True
    backends.list_of_moto_modules = listed


def _response_methods_listed_once() -> None:
    """moto lists its response class's methods (``inspect.getmembers``, every attribute looked at) at
    every request, to tell whether it implements the action asked: a seventh of a GetItem's time on
    its server. A class's methods are listed once; they are fixed when moto is imported."""
    from moto.core import responses

    if hasattr(responses.method_names_from_class, "cache_info"):
        return
    responses.method_names_from_class = functools.lru_cache(maxsize=None)(responses.method_names_from_class)


def _s3_versions_under_prefix() -> None:
    """moto lists a bucket's object versions by deep-copying every version of every key in the
    bucket, data included, before it looks at the prefix: a tenth of the suite's time went there
    (``tests.factories.footprint`` lists a run's versions after every refusal). The same listing
    copies only the keys under the prefix. (Calls are serialized: a bucket's keys are swapped for
    one call at a time.)"""
    from moto.s3.models import S3Backend
    from moto.s3.utils import _VersionedKeyStore

    if getattr(S3Backend.list_object_versions, "under_prefix", False):
        return
    original = S3Backend.list_object_versions

    def list_object_versions(self, bucket_name, *args, **kwargs):
        prefix = args[3] if len(args) > 3 else kwargs.get("prefix") or ""
        bucket = self.get_bucket(bucket_name)
        every = bucket.keys
        under = _VersionedKeyStore()
        for key, versions in every.iterlists():
            if key.startswith(prefix):
                under.setlist(key, versions)
        bucket.keys = under
        try:
            return original(self, bucket_name, *args, **kwargs)
        finally:
            bucket.keys = every

    list_object_versions.under_prefix = True
    S3Backend.list_object_versions = list_object_versions


def _sqs_retention_read_once() -> None:
    """moto checks each message it hands over against its queue's retention period by computing all
    of the queue's attributes three times, its message counts among them (each a walk of every
    message): a receive of ten took 10.9 ms from a queue of ten, 152 ms from a queue of 210. The
    same check reads the one attribute: 1.5 ms and 3.6 ms."""
    from moto.sqs import models

    if hasattr(models.SQSBackend.is_message_valid_based_on_retention_period, "moto_own"):
        return
    own = models.SQSBackend.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self, queue_name, message) -> bool:
        retention_period = self.get_queue(queue_name).message_retention_period
        return retention_period + message.sent_timestamp / 1000 > models.unix_time()

    is_message_valid_based_on_retention_period.moto_own = own
    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
