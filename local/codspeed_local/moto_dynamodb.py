"""moto's DynamoDB, quicker where the suite measured it slow: shortcuts of ``moto_speedups`` (installed
with the others), each giving moto's own answers (``tests/integration/test_moto_server.py`` and
``test_moto_speedups.py`` compare them). Calls to the stack's moto are serialized (``moto_server``): a
shortcut may swap a module's or an object's attribute for one call."""

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def dynamodb_values_sized_in_place() -> None:
    """moto sizes a map or list by wrapping each value again (a new ``DynamoType`` of its whole subtree at
    each level) and sizes every item at each attribute it sets (an item's 400 KB): a sixth of an update's
    time, most of a query's. The same sizes, from the values as they are."""
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.utilities import bytesize, number_size

    if hasattr(DynamoType.size, "moto_own"):
        return
    own = DynamoType.size

    def size(self) -> int:
        kind, value = self.type, self.value
        if kind == "N":
            return number_size(str(value))
        if kind in ("SS", "NS", "BS"):
            return sum(number_size(str(v)) if kind == "NS" else bytesize(v) for v in value)
        if kind in ("L", "M"):
            values = value if kind == "L" else value.values()
            keys = sum(map(bytesize, value)) if kind == "M" else 0
            return keys + sum(size(v if type(v) is DynamoType else DynamoType(v)) for v in values)
        return 1 if isinstance(value, bool) else bytesize(value)

    size.moto_own = own
    DynamoType.size = size


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


def dynamodb_item_by_item() -> None:
    """moto backs a table up before a transaction (a deep copy of all its items, to roll back),
    and queries a table by walking every item: both grow with the table, and the suite's table
    grows with every run (a session's transactions spent most of their time copying). The same
    rollback keeps only the items the transaction names, and a query of a table's own key reads
    that key's items: the same answers (but where moto ends a page at an item its key condition
    leaves out, which DynamoDB never reads). (Calls are serialized: the module's ``copy`` and a
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
        self.all_items = lambda: _in_key_order(self.items.get(hash_key, {}).values(), *args[:2])
        try:
            with _answer_sized_once_not_copied():
                return query(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    query_by_key.moto_own = query
    Table.query = query_by_key


def _in_key_order(items, comparison=None, bounds=()) -> list:
    """The key's items its sort key condition keeps, in sort key order: moto compares each item's sort key
    again and sorts what it is given (then in one pass), but it sorted the key's every item, comparing
    their typed values pair by pair, and a whole run's items are read a key condition at a time."""
    kept = [item for item in items if not comparison or item.range_key.compare(comparison, bounds)]
    return sorted(kept, key=lambda item: item.range_key.cast_value)


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


def dynamodb_answers_as_json() -> None:
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
