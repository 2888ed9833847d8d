"""Where moto answers otherwise than AWS does and the stack relies on AWS's answer: patched always,
outside the speed shortcuts (``moto_speedups``), each against the moto the constraints pin
(``tests/integration/test_moto_fidelity.py`` holds each to DynamoDB's documented behaviour)."""

import copy


def as_aws() -> None:
    _updates_all_or_nothing()


def _updates_all_or_nothing() -> None:
    """DynamoDB applies none of an UpdateItem it refuses (an item past 400 KB, a failed condition, an
    invalid expression: "If the condition is not met, the update does not take place", and an item's
    400 KB limit refuses the write, DynamoDB developer guide, UpdateItem and Service quotas); moto
    applies its actions one by one on the stored item and, refusing the result for its size, keeps
    what came before the oversized value (a run read ``forwarded`` here where AWS leaves it
    ``finalizing``). The item as it was is put back on any refusal. Not reported upstream yet;
    ``tests/integration/test_moto_fidelity.py`` fails the day moto applies an update all or nothing itself,
    so that this patch can go."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType

    if getattr(DynamoDBBackend.update_item, "all_or_nothing", False):
        return
    original = DynamoDBBackend.update_item

    def update_item(self, table_name, key, *args, **kwargs):
        table = self.get_table(table_name)
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.has_range_key else None
        before = copy.deepcopy(table.get_item(hash_value, range_value))
        try:
            return original(self, table_name, key, *args, **kwargs)
        except Exception:
            items = table.items[hash_value] if range_value is not None else table.items
            at = range_value if range_value is not None else hash_value
            if before is None:
                items.pop(at, None)
            else:
                items[at] = before
            raise

    update_item.all_or_nothing = True
    DynamoDBBackend.update_item = update_item
