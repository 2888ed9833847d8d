"""What every item kind of the ledger shares: the one table's key layout, (de)serialisation,
transactions and the cancellation reasons DynamoDB answers them with."""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from codspeed_rules.backoff import backoff

from ...domain.errors import Busy

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import KeysAndAttributesTypeDef, TransactWriteItemTypeDef

# A run record, its shards and its upload requests share a partition, so one consistent Query
# reads a whole run. Sort keys, in the order they sort:
RUN_SK = "RUN"
TALLY_PREFIX = "RUN#TALLY#"  # the run's counts of its shards' changes, spread over TALLIES items (see tally_sk)
CARRIED_PREFIX = "CARRIED#"  # a shard a finished run carried from its baseline, as its report says it: an item each
PART_PREFIX = "PART#"  # the upstream's answer about one upload of the run: an item each, so the run item stays small
ANNOUNCED, FORWARDED_PART = "announced", "forwarded"  # what a part's item says: its POST answered, or it delivered
SHARD_PREFIX = "SHARD#"
UPLOAD_PREFIX = "UPLOAD#"  # sorts after RUN and SHARD#: snapshots stop before it
META_PREFIX = "~META#"  # sorts after the shards and upload requests: out of snapshots
TOKEN_PREFIX = "~TOKEN#"  # an upload's job's OIDC token, until it expires (its TTL): out of snapshots and reports
COMMENT_PREFIX = "~COMMENT#"  # a pull request's sticky comment (in the project's pull-request partition)
CLAIM_PREFIX = "~CLAIM#"  # one upload's (or a parts run's shard's) claim by its finalizer: out of snapshots
KEPT_PREFIX = "~KEPT#"  # a shard the run carried, copied beside it to stay a source of its branch: out of snapshots
JOB_PREFIX = "~JOB#"  # a Buildkite job's archive (its MD5), once a job: out of snapshots
NOTE_PREFIX = "~NOTE#"  # which shard a tally's recent change changed (note_sk): read by key only
# Partitions of their own:
PROJECT_PREFIX = "PROJECT#"  # a project's runs, by when they opened: its page lists them
OPEN_INDEX = "open-runs"  # runs still open (by deadline) and runs being finalized (by lease end)
FINALIZING_PK = "finalizing"

TALLIES = 16
CHANGE_NOTES = 64  # notes a tally keeps of its latest changes (which shard each changed): reports read only those

CONDITION_FAILED = "ConditionalCheckFailed"
TRANSACTION_TRIES = 8
_ser, _de = TypeSerializer(), TypeDeserializer()


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def dump(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items()}


def load(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(_de.deserialize(v)) for k, v in item.items()}


def run_pk(project: str, run_id: str) -> str:
    return f"RUN#{project}#{run_id}"


def tally_sk(shard: str) -> str:
    """The tally that counts a shard's changes (its revisions, and per job group the shards
    accepted). A shard's transaction updates its tally, never the run item: concurrent arrivals
    meet on one of 16 items, not all on one, and the run item is written by the run's own
    changes only. The claim closes every tally in the transaction that claims the run."""
    return tally_sks()[zlib.crc32(shard.encode()) % TALLIES]


def tally_sks() -> list[str]:
    return [f"{TALLY_PREFIX}{i:02d}" for i in range(TALLIES)]


def note_sk(tally: str, rev: int) -> str:
    """Where a tally's change number ``rev`` notes the shard it changed: the tally's notes are
    CHANGE_NOTES items, each change overwriting the note CHANGE_NOTES changes before it."""
    return f"{NOTE_PREFIX}{tally.removeprefix(TALLY_PREFIX)}#{rev % CHANGE_NOTES:02d}"


def notes_wanted(tally: str, since: int, rev: int) -> dict[str, int] | None:
    """The notes that name the shards a tally's changes after ``since`` (up to ``rev``) changed, by
    sort key, with the change each must be the note of; None when they are more than it keeps."""
    if rev < since or rev - since > CHANGE_NOTES:
        return None
    return {note_sk(tally, at): at for at in range(since + 1, rev + 1)}


def noted_shards(wanted: dict[str, int], notes: dict[str, dict[str, Any]]) -> set[str] | None:
    """The shards the ``wanted`` notes (read: ``notes``, by sort key) name, or None when they do not
    name every change.

    A writer notes its change at the revision it expects (the tally's, read just before its
    transaction, plus one); two writers that read the same revision write the same note, and one
    is lost. Every note is at or below its own change's revision, so a note wanted for change p
    that says p was written by a change after the last read: when each one wanted says its own
    change, the changes since (as many as the notes) wrote one each, and every shard they changed
    is named."""
    named = set()
    for sk, at in wanted.items():
        note = notes.get(sk)
        if note is None or note.get("rev") != at:
            return None
        named.add(note["shard"])
    return named


def cancelled(exc: ClientError) -> list[str] | None:
    """The per-item codes of a cancelled transaction, or None for any other error."""
    if exc.response["Error"]["Code"] != "TransactionCanceledException":
        return None
    reasons = exc.response.get("CancellationReasons") or []
    return [r.get("Code", "None") for r in reasons]


def condition_failed(exc: ClientError) -> bool:
    return exc.response["Error"]["Code"] == "ConditionalCheckFailedException"


class TransactionContended(Busy):
    """DynamoDB kept cancelling a transaction for reasons other than its conditions (two writers
    on one item: TransactionConflict; ThrottlingError): the caller fails and is retried later."""


class TableItems:
    """One kind of item in the ledger's table; every kind reads and writes through these."""

    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient,
        retention_seconds: int = 30 * 86400,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.table = table_name
        self.db = client
        self.retention_seconds = retention_seconds
        self.sleep = sleep

    def expires_at(self) -> int:
        """Every item carries the table's TTL attribute: the run's records go with its bundles."""
        return int(time.time()) + self.retention_seconds

    def key(self, project: str, run_id: str, sk: str) -> dict[str, Any]:
        return dump({"pk": run_pk(project, run_id), "sk": sk})

    def item_update(  # noqa: PLR0913 -- an UpdateItem's parts
        self,
        key: dict[str, Any],
        expression: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """An UpdateItem of one item: a transaction's part, or ``update_if``'s."""
        return {
            "TableName": self.table,
            "Key": key,
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            **({"ExpressionAttributeNames": names} if names else {}),  # DynamoDB refuses an empty map
            "ExpressionAttributeValues": dump(values),
        }

    def update_run(  # noqa: PLR0913 -- the run, and the update it makes
        self,
        project: str,
        run_id: str,
        expression: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> bool:
        """A conditional update of an existing run's item (``run_update``); False when its condition fails."""
        conditioned = f"attribute_exists(pk) AND ({condition})"
        return self.update_if(self.run_update(project, run_id, expression, conditioned, values, names))

    def update_if(self, update: dict[str, Any]) -> bool:
        """One conditional UpdateItem (``item_update``); False when its condition fails."""
        try:
            self.db.update_item(**update)
            return True
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise

    def get_many(
        self, project: str, run_id: str, sks: list[str], attributes: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """The items of one run with these sort keys (those there are), read consistently, 100 a
        request; only ``attributes`` of them, when given."""
        found: list[dict[str, Any]] = []
        wanted = [self.key(project, run_id, sk) for sk in sks]
        while wanted:
            asked: KeysAndAttributesTypeDef = {"Keys": wanted[:100], "ConsistentRead": True}
            if attributes:
                asked["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(attributes)))
                asked["ExpressionAttributeNames"] = {f"#a{i}": a for i, a in enumerate(attributes)}
            answer = self.db.batch_get_item(RequestItems={self.table: asked})
            found += map(load, answer["Responses"].get(self.table, []))
            unprocessed = answer.get("UnprocessedKeys", {}).get(self.table)
            wanted = wanted[100:] + list(unprocessed["Keys"] if unprocessed else [])
        return found

    def write_all(self, items: list[dict[str, Any]]) -> None:
        """Put every item, 25 a request (BatchWriteItem's most), again what DynamoDB left unprocessed."""
        attempt = 0
        wanted: list[Any] = [{"PutRequest": {"Item": dump(item)}} for item in items]
        while wanted:
            answer = self.db.batch_write_item(RequestItems={self.table: wanted[:25]})
            left = answer.get("UnprocessedItems", {}).get(self.table) or []
            wanted = wanted[25:] + left
            if left:
                self.sleep(backoff(attempt, 0.05, 2.0))
                attempt += 1

    def query_all(self, **query: Any) -> list[dict[str, Any]]:
        """Every item a Query answers, page after page."""
        paginator = self.db.get_paginator("query")
        return [load(i) for page in paginator.paginate(TableName=self.table, **query) for i in page["Items"]]

    def query_run(
        self, project: str, run_id: str, condition: str, values: dict[str, Any], only: str | None = None
    ) -> list[dict[str, Any]]:
        """Items of one run's partition, read consistently; ``only``: those of them this filter keeps."""
        return self.query_all(
            ConsistentRead=True,
            KeyConditionExpression=f"pk = :pk AND {condition}",
            ExpressionAttributeValues=dump({":pk": run_pk(project, run_id), **values}),
            **({"FilterExpression": only} if only else {}),
        )

    def run_update(
        self,
        project: str,
        run_id: str,
        expression: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The run item's update (a transaction's part, or ``update_if``'s): every change to the run's
        own record bumps its revision."""
        names = {**({"#state": "state"} if "#state" in expression + condition else {}), **(names or {})}
        return self.item_update(self.key(project, run_id, RUN_SK), expression, condition, {":one": 1, **values}, names)

    def tally_update(
        self,
        project: str,
        run_id: str,
        shard: str,
        expression: str,
        condition: str | None,
        values: dict[str, Any],
        names: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A shard's tally's part of a transaction: every change to a shard bumps its tally's revision."""
        return {
            "TableName": self.table,
            "Key": self.key(project, run_id, tally_sk(shard)),
            "UpdateExpression": f"{expression} SET expires_at = if_not_exists(expires_at, :exp)",
            **({"ConditionExpression": condition} if condition else {}),
            **({"ExpressionAttributeNames": names} if names else {}),
            "ExpressionAttributeValues": dump({":one": 1, ":exp": self.expires_at(), **values}),
        }

    def tally_rev(self, project: str, run_id: str, shard: str) -> int:
        """The revision of a shard's tally, read just before the transaction that notes its change
        (``codec.noted_shards``): a change the arrival's own read (seconds before, ahead of
        validating the bundle) missed would put its note where another's is."""
        item = self.db.get_item(
            TableName=self.table,
            Key=self.key(project, run_id, tally_sk(shard)),
            ProjectionExpression="#rev",
            ExpressionAttributeNames={"#rev": "rev"},
            ConsistentRead=True,
        ).get("Item")
        return load(item).get("rev", 0) if item else 0

    def change_note(self, project: str, run_id: str, shard: str, tally_rev: int) -> dict[str, Any]:
        """The note of a shard's change, in the transaction that changes it: where its tally's next
        revision after ``tally_rev`` (as read just before) notes it (``noted_shards``)."""
        rev = tally_rev + 1
        return {
            "TableName": self.table,
            "Item": dump(
                {
                    "pk": run_pk(project, run_id),
                    "sk": note_sk(tally_sk(shard), rev),
                    "rev": rev,
                    "shard": shard,
                    "expires_at": self.expires_at(),
                }
            ),
        }

    def transact_noted(self, project: str, run_id: str, shard: str, items: list[dict[str, Any]]) -> list[str] | None:
        """``transact`` a change of a shard (``items``) with the note of it, at its tally's next
        revision, read just before (``noted_shards``)."""
        rev = self.tally_rev(project, run_id, shard)
        return self.transact([*items, {"Put": self.change_note(project, run_id, shard, rev)}])

    def transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """Run a transaction: None when it was written, else the per-item codes of the cancellation
        that came from a condition. Cancellations for any other reason (TransactionConflict, which
        real DynamoDB answers whenever two transactions touch one item at once, ThrottlingError,
        ...) say nothing about the conditions: the transaction is tried again, with jitter."""
        for attempt in range(TRANSACTION_TRIES):
            try:
                self.db.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", items))
                return None
            except ClientError as exc:
                codes = cancelled(exc)
                if codes is None:
                    raise
                if CONDITION_FAILED in codes:
                    return codes
                self.sleep(backoff(attempt, 0.02, 1.0))
        raise TransactionContended(
            f"a transaction was cancelled {TRANSACTION_TRIES} times for other reasons than its conditions"
        )


GROUP_PREFIX, COUNT_PREFIX = "group@", "arrived@"  # top-level attributes: one per job group (ADD needs top level)
