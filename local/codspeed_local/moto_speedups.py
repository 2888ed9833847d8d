"""moto, quicker where the suite measured it slow, each shortcut giving moto's own answers
(``tests/integration/test_moto_server.py`` and ``test_moto_speedups.py`` compare them). Calls to the stack's moto are
serialized (``moto_server``): a shortcut may swap a module's or an object's attribute for one call."""

import copy
import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .moto_update_checks import update_expressions_checked_once, update_expressions_parsed_once


def speed_up_moto() -> None:
    _dynamodb_item_by_item()
    update_expressions_checked_once()
    update_expressions_parsed_once()
    _dynamodb_answers_as_json()
    _s3_versions_under_prefix()
    _sqs_retention_read_once()
    _list_moto_modules_once()
    _response_methods_listed_once()


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


class _CopyWhere:
    """``copy`` as one of moto's modules sees it during one call (calls are serialized): what ``kept``
    answers for a value (None: nothing) stands for its deep copy; anything else is copied as moto would."""

    def __init__(self, kept: Callable[[Any], Any]) -> None:
        self._kept = kept

    def deepcopy(self, value, memo=None):
        kept = self._kept(value)
        return copy.deepcopy(value, memo) if kept is None else kept

    def __getattr__(self, name):
        return getattr(copy, name)


def _touched(backend, transact_items) -> list[tuple[object, object, object, object]]:
    """(table, hash key, range key, the item as it is now or None) of each item a transaction names."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    touched = []
    for entry in transact_items:
        for op in entry.values():
            table = backend.tables.get(op.get("TableName"))
            keys = _keys(table, op.get("Key") or op.get("Item"))
            if keys is None:
                continue
            hash_value, range_value = DynamoType(keys[0]), None if keys[1] is None else DynamoType(keys[1])
            current = table.get_item(hash_value, range_value)
            touched.append((table, hash_value, range_value, copy.deepcopy(current)))
    return touched


def _keys(table, key) -> tuple[object, object] | None:
    """The hash and range key an operation names (None: no whole key of a known table)."""
    if table is None or not key or table.hash_key_attr not in key:
        return None
    if not table.has_range_key:
        return key[table.hash_key_attr], None
    if table.range_key_attr not in key:
        return None
    return key[table.hash_key_attr], key[table.range_key_attr]


def _undo_touched(touched) -> None:
    for table, hash_value, range_value, original in reversed(touched):
        if range_value is None:
            if original is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = original
        elif original is None:
            table.items[hash_value].pop(range_value, None)
        else:
            table.items[hash_value][range_value] = original


def _dynamodb_item_by_item() -> None:
    """moto backs a table up before a transaction (a deep copy of all its items, to roll back),
    and queries a table by walking every item: both grow with the table, and the suite's table
    grows with every run (a session's transactions spent most of their time copying). The same
    rollback keeps only the items the transaction names, and a query of a table's own key reads
    that key's items: the same answers. (Calls are serialized: the module's ``copy`` and a
    table's ``all_items`` are swapped for one call at a time.)"""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "item_by_item", False):
        return
    original = backend.transact_write_items

    def transact_write_items(self, transact_items):
        touched = _touched(self, transact_items) if len(transact_items) <= 100 else []
        # a table is not copied (its "backup" is the live table, so its rollback is a no-op): the items the
        # transaction touches are kept and put back instead (``_undo_touched``)
        models.copy = _CopyWhere(lambda value: value if isinstance(value, Table) else None)
        try:
            return original(self, transact_items)
        except Exception:
            _undo_touched(touched)
            raise
        finally:
            models.copy = copy

    transact_write_items.item_by_item = True
    backend.transact_write_items = transact_write_items

    query = Table.query

    def query_by_key(self, hash_key, *args, **kwargs):
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name is not None or not self.has_range_key or hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        self.all_items = lambda: list(self.items.get(hash_key, {}).values())
        try:
            with _answer_sized_once_not_copied():
                return query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    query_by_key.moto_own = query
    Table.query = query_by_key


@contextmanager
def _answer_sized_once_not_copied() -> Iterator[None]:
    """moto sizes each item of a query's key twice (to stop at a page's 1 MB, then to count it) and
    deep-copies its answer before writing it out: a sixth of a Query's time on its server. During one
    call (calls are serialized) an item is sized once, and the answer is the items themselves."""
    from moto.dynamodb.models import table
    from moto.dynamodb.models.dynamo_type import Item

    own_size, sizes = Item.size, {}

    def size(item) -> int:
        if id(item) not in sizes:
            sizes[id(item)] = own_size(item)
        return sizes[id(item)]

    # the list of items it answers: nothing changes them before they are written out (a projection makes new ones)
    Item.size, table.copy = size, _CopyWhere(lambda value: list(value) if isinstance(value, list) else None)
    try:
        yield
    finally:
        Item.size, table.copy = own_size, copy


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


def plain_json(answer) -> str | None:
    """The answer as JSON when it holds only strings, numbers, booleans, lists and string-keyed
    objects of them, nothing null (then ``json.dumps`` writes it as moto's serializer would);
    None otherwise."""
    return json.dumps(answer) if _plain(answer) else None


def _plain(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return isinstance(value, (str, int, float, bool))


def _dynamodb_answers_as_json() -> None:
    """moto serializes each DynamoDB answer by walking the operation's botocore shapes, trying
    several spellings of every attribute's name: three quarters of a Query's time on its server.
    An answer that is plain JSON (items, keys, counts: no bytes, dates or nulls, which keep
    moto's own serializer) is the same document written with ``json.dumps``; botocore reads
    both alike (``tests/integration/test_moto_server.py`` compares them on every answer)."""
    from moto.dynamodb.responses import DynamoResult

    if getattr(DynamoResult.execute_result, "as_json", False):
        return
    serialize = DynamoResult.execute_result

    def execute_result(self, context):
        body = plain_json(self.result)
        if body is None:
            return serialize(self, context)
        return 200, {"Content-Type": f"application/x-amz-json-{context.service_model.metadata['jsonVersion']}"}, body

    execute_result.as_json = True
    execute_result.moto_serializer = serialize
    DynamoResult.execute_result = execute_result
