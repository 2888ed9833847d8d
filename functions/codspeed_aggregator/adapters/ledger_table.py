"""The ledger in one DynamoDB table: a run record, its shards and its upload requests
share a partition, so one consistent Query reads a whole run."""

import json
import random
import time
from decimal import Decimal

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from ..domain.ledger import (
    ARRIVED, FINALIZING, FORWARD_FAILED, LATE, OPEN, REJECTED,
    ArrivalView, RunRecord, ShardRecord, Snapshot, UploadRecord,
)
from ..domain.manifest import Manifest

RUN_SK = "RUN"
PROJECT_PREFIX = "PROJECT#"  # a project's runs, by when they opened: its page lists them
PART_PREFIX = "PART#"  # the upstream's answer about one upload of the run: an item each, so the run item stays small
UPLOAD_PREFIX = "UPLOAD#"  # sorts after RUN and SHARD#: snapshots stop before it
META_PREFIX = "~META#"  # sorts after the shards and upload requests: out of snapshots
BENCHMARKS_PREFIX = "~BENCH#"  # a shard's benchmark names, beside it: a snapshot's read units stay small
OPEN_INDEX = "open-runs"  # runs still open (by deadline) and runs being finalized (by lease end)
FINALIZING_PK = "finalizing"
_ser, _de = TypeSerializer(), TypeDeserializer()


def _plain(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _dump(values: dict) -> dict:
    return {k: _ser.serialize(v) for k, v in values.items()}


def _load(item: dict) -> dict:
    return {k: _plain(_de.deserialize(v)) for k, v in item.items()}


def _pk(project: str, run_id: str) -> str:
    return f"RUN#{project}#{run_id}"


def _cancelled(exc: ClientError) -> list[str] | None:
    """The per-item codes of a cancelled transaction, or None for any other error."""
    if exc.response["Error"]["Code"] != "TransactionCanceledException":
        return None
    reasons = exc.response.get("CancellationReasons") or []
    return [r.get("Code", "None") for r in reasons]


def _condition_failed(exc: ClientError) -> bool:
    return exc.response["Error"]["Code"] == "ConditionalCheckFailedException"


CONDITION_FAILED = "ConditionalCheckFailed"
TRANSACTION_TRIES = 8


class TransactionContended(Exception):
    """DynamoDB kept cancelling a transaction for reasons other than its conditions (two writers
    on one item: TransactionConflict; ThrottlingError): the caller fails and is retried later."""


BENCHMARKS_ITEM_BYTES = 300_000  # under DynamoDB's 400 KB item, whatever the benchmarks' names


def _within(limit: int, names: list[str], results: dict) -> tuple[list[str], dict]:
    """A shard's benchmark names and results, the last ones left out until they fit one item."""
    size = sum(len(n.encode()) + 3 for n in names) + len(json.dumps(results))
    while size > limit and (names or results):
        if results:
            name, result = results.popitem()
            size -= len(json.dumps({name: result}))
        else:
            size -= len(names.pop().encode()) + 3
    return names, results


class SnapshotContended(Exception):
    """A run changed between the pages of every read tried: whoever changed it publishes after."""


def _transact(db, items: list[dict], sleep=time.sleep) -> list[str] | None:
    """Run a transaction: None when it was written, else the per-item codes of the cancellation
    that came from a condition. Cancellations for any other reason (TransactionConflict, which
    real DynamoDB answers whenever two transactions touch one item at once, ThrottlingError,
    ...) say nothing about the conditions: the transaction is tried again, with jitter."""
    for attempt in range(TRANSACTION_TRIES):
        try:
            db.transact_write_items(TransactItems=items)
            return None
        except ClientError as exc:
            codes = _cancelled(exc)
            if codes is None:
                raise
            if CONDITION_FAILED in codes:
                return codes
            sleep(random.uniform(0.5, 1.0) * min(1.0, 0.02 * 2**attempt))
    raise TransactionContended(f"a transaction was cancelled {TRANSACTION_TRIES} times for other reasons than its conditions")


class DynamoLedger:
    def __init__(self, table_name: str, client, retention_seconds: int = 30 * 86400, sleep=time.sleep) -> None:
        self.table = table_name
        self.db = client
        self.retention_seconds = retention_seconds
        self.sleep = sleep

    def _expires_at(self) -> int:
        """Every item carries the table's TTL attribute: the run's records go with its bundles."""
        return int(time.time()) + self.retention_seconds

    # -- reading -----------------------------------------------------------------

    def _all(self, **query) -> list[dict]:
        """Every item a Query answers, page after page."""
        items, start = [], None
        while True:
            page = self.db.query(TableName=self.table, **query, **({"ExclusiveStartKey": start} if start else {}))
            items += [_load(i) for i in page["Items"]]
            start = page.get("LastEvaluatedKey")
            if not start:
                return items

    def _query(self, project: str, run_id: str, condition: str, values: dict) -> list[dict]:
        """Items of one run's partition, read consistently."""
        return self._all(ConsistentRead=True, KeyConditionExpression=f"pk = :pk AND {condition}",
                         ExpressionAttributeValues=_dump({":pk": _pk(project, run_id), **values}))

    def snapshot(self, project: str, run_id: str, with_names: bool = False, tries: int = 20) -> Snapshot | None:
        """One consistent read of a run (see domain.ledger), or None when no such run.

        It reads the run's record, its shards and its parts, all small: upload requests
        (``UPLOAD#``), their metadata and the shards' benchmark names sort after them and are
        read only when asked for. A run that kept changing under every read raises
        ``SnapshotContended``: nothing is ever built from a read that saw two instants."""
        for attempt in range(tries):
            snap = self._parse(self._query(project, run_id, "sk < :uploads", {":uploads": UPLOAD_PREFIX}))
            if snap is None or snap.consistent():
                if snap is not None and with_names:
                    for item in self._query(project, run_id, "begins_with(sk, :b)", {":b": BENCHMARKS_PREFIX}):
                        shard = snap.shards.get(item["sk"].removeprefix(BENCHMARKS_PREFIX))
                        if shard is not None and shard.upload_id == item.get("upload_id"):
                            shard.benchmark_names = item.get("names") or []
                            shard.results = json.loads(item.get("results") or "{}")
                return snap
            self.sleep(random.uniform(0.5, 1.0) * 0.005 * (attempt + 1))
        raise SnapshotContended(f"run {run_id} of {project} changed under each of {tries} reads")

    @staticmethod
    def _parse(items: list[dict]) -> Snapshot | None:
        run, shards, parts = None, {}, {"announced": {}, "forwarded": {}}
        for item in items:
            if item["sk"] == RUN_SK:
                run = _run_from(item)
            elif item["sk"].startswith("SHARD#"):
                shard = _shard_from(item)
                shards[shard.name] = shard
            elif item["sk"].startswith(PART_PREFIX):
                _, kind, index = item["sk"].split("#")
                if kind in parts:  # not a part's claim
                    parts[kind][str(int(index))] = json.loads(item["answer"])
        if run is None:
            return None
        run.announced_parts, run.forwarded_parts = parts["announced"], parts["forwarded"]
        return Snapshot(run, shards)

    def open_runs_past(self, now: int) -> list[tuple[str, str]]:
        """Open runs whose deadline passed."""
        return self._indexed(OPEN, now)

    def stalled_finalizing(self, now: int) -> list[tuple[str, str]]:
        """Runs still finalizing whose finalizer's lease ran out."""
        return self._indexed(FINALIZING_PK, now)

    def _indexed(self, kind: str, now: int) -> list[tuple[str, str]]:
        items = self._all(IndexName=OPEN_INDEX, KeyConditionExpression="open_pk = :o AND deadline_at <= :now",
                          ExpressionAttributeValues=_dump({":o": kind, ":now": now}))
        return [(i["project"], i["run_id"]) for i in items]

    # -- project tokens (stored as digests) ----------------------------------------

    def put_token(self, digest: str, project: str, created_at: str) -> None:
        self.db.put_item(TableName=self.table, Item=_dump(
            {"pk": f"TOKEN#{digest}", "sk": "TOKEN", "project": project, "created_at": created_at}))

    def token_project(self, digest: str) -> str | None:
        item = self.db.get_item(TableName=self.table, Key=_dump({"pk": f"TOKEN#{digest}", "sk": "TOKEN"})).get("Item")
        return _load(item)["project"] if item else None

    def delete_token(self, digest: str) -> bool:
        answer = self.db.delete_item(TableName=self.table, Key=_dump({"pk": f"TOKEN#{digest}", "sk": "TOKEN"}),
                                     ReturnValues="ALL_OLD")
        return "Attributes" in answer

    # -- writing -----------------------------------------------------------------

    def open_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Create the run if it is new; either way answer the run as stored and whether it was created."""
        item = {
            "pk": _pk(run.project, run.run_id), "sk": RUN_SK, "project": run.project, "run_id": run.run_id,
            "state": run.state, "manifest": run.manifest.to_item(), "commit": run.commit, "ref": run.ref,
            "base_ref": run.base_ref, "identity": json.dumps(run.identity, sort_keys=True),
            "created_at": run.created_at, "deadline_at": run.deadline_at, "open_pk": OPEN,
            "rev": run.rev, "run_changes": run.run_changes, "arrived_count": run.arrived_count,
            "run_attempt": run.attempt, "ci_url": run.ci_url, "expires_at": self._expires_at(),
        }
        if run.variants:
            item["variants"] = set(run.variants)
        try:
            self.db.put_item(TableName=self.table, Item=_dump(item), ConditionExpression="attribute_not_exists(pk)",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD")  # the run as stored: no read after
            self.db.put_item(TableName=self.table, Item=_dump({  # the project's list of runs, newest last
                "pk": f"{PROJECT_PREFIX}{run.project}", "sk": f"{run.created_at}#{run.run_id}", "run_id": run.run_id,
                "expires_at": self._expires_at()}))
            return run, True
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            return _run_from(_load(exc.response["Item"])), False

    def add_upload(self, project: str, run_id: str, upload: UploadRecord) -> None:
        """The upload request, and beside it (out of snapshots) the CodSpeed metadata it came with.
        Two plain writes, not a transaction: nobody can upload (so nothing can arrive) before the
        grant is answered, which is after both; a grant that fails between them leaves an item
        that expires. (Half the write units of a transaction.)"""
        expires = self._expires_at()
        meta = {"pk": _pk(project, run_id), "sk": f"{META_PREFIX}{upload.upload_id}",
                "metadata": json.dumps(upload.metadata), "expires_at": expires}
        item = {
            "pk": _pk(project, run_id), "sk": f"{UPLOAD_PREFIX}{upload.shard}#{upload.upload_id}", "shard": upload.shard,
            "upload_id": upload.upload_id, "size": upload.size, "label": upload.label, "executor": upload.executor,
            "requested_at": upload.requested_at, "expires_at": expires,
        }
        for written in (meta, item):
            self.db.put_item(TableName=self.table, Item=_dump(written))

    def add_variant(self, project: str, run_id: str, variant: str) -> bool:
        """Note a kind of upload the run had not seen (another executor): its manifest now expects it
        too. False when the run is no longer open or is closing."""
        return self._update_run(project, run_id, "ADD variants :v, rev :one, run_changes :one",
                                "#state = :open AND attribute_not_exists(close_requested)",
                                {":v": {variant}, ":open": OPEN})

    def recent_runs(self, project: str, limit: int) -> list[RunRecord]:
        """A project's latest runs, newest first: its list, then its run items in one batch read."""
        page = self.db.query(TableName=self.table, KeyConditionExpression="pk = :pk", ScanIndexForward=False,
                             Limit=limit, ExpressionAttributeValues=_dump({":pk": f"{PROJECT_PREFIX}{project}"}))
        ids = [_load(i)["run_id"] for i in page["Items"]]
        if not ids:
            return []
        found, keys = {}, [self._key(project, r, RUN_SK) for r in ids]
        while keys:
            answer = self.db.batch_get_item(RequestItems={self.table: {"Keys": keys[:100]}})
            for item in map(_load, answer["Responses"].get(self.table, [])):
                found[item["run_id"]] = _run_from(item)
            keys = keys[100:] + answer.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
        return [found[r] for r in ids if r in found]

    def run_record(self, project: str, run_id: str) -> RunRecord | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(project, run_id, RUN_SK), ConsistentRead=True).get("Item")
        return _run_from(_load(item)) if item else None

    def upload_metadata(self, project: str, run_id: str, upload_id: str) -> dict | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(project, run_id, f"{META_PREFIX}{upload_id}"),
                                ConsistentRead=True).get("Item")
        return json.loads(_load(item)["metadata"]) if item else None

    def inherit_arrived(self, project: str, earlier: str, run_id: str) -> int:
        """Copy the shards counted in an earlier attempt of a run (and their upload metadata) into
        ``run_id``, the next attempt, before that run is opened; answers how many there are.
        Each shard's copy is conditional, so one counted meanwhile in the new attempt is left as it is."""
        items = self._query(project, earlier, "begins_with(sk, :shard)", {":shard": "SHARD#"})
        names = {i["sk"].removeprefix(BENCHMARKS_PREFIX): i
                 for i in self._query(project, earlier, "begins_with(sk, :b)", {":b": BENCHMARKS_PREFIX})}
        arrived = [i for i in items if i.get("state") == ARRIVED]
        for item in arrived:
            copy = {**item, "pk": _pk(project, run_id), "rev": 0, "inherited_from": item.get("inherited_from") or earlier}
            try:
                self.db.put_item(TableName=self.table, Item=_dump(copy), ConditionExpression="attribute_not_exists(pk)")
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
                continue
            if (found := names.get(item["sk"].removeprefix("SHARD#"))) is not None:
                self.db.put_item(TableName=self.table, Item=_dump({**found, "pk": _pk(project, run_id)}))
            self.copy_upload_metadata(project, earlier, run_id, item["upload_id"])
        return len(arrived)

    def arrival_view(self, project: str, run_id: str, shard: str, upload_id: str) -> ArrivalView:
        """The three items an arrival needs (run, shard, upload request) in one small consistent read,
        however many shards the run has."""
        keys = {RUN_SK: None, f"SHARD#{shard}": None, f"{UPLOAD_PREFIX}{shard}#{upload_id}": None}
        answer = self.db.batch_get_item(RequestItems={self.table: {
            "Keys": [self._key(project, run_id, sk) for sk in keys], "ConsistentRead": True}})
        for item in map(_load, answer["Responses"].get(self.table, [])):
            keys[item["sk"]] = item
        run, shard_item, upload = keys.values()
        return ArrivalView(
            run=_run_from(run) if run else None,
            shard=_shard_from(shard_item) if shard_item else None,
            upload=_upload_from(upload) if upload else None,
        )

    def record_arrival(self, project: str, run_id: str, shard: ShardRecord, requested_at: str,
                       previous: ShardRecord | None) -> str:
        """Count an accepted bundle once, replacing ``previous`` (the shard as read): "recorded",
        "changed" (the shard is no longer as read: read again) or "run_not_open".

        The run's ``arrived_count`` grows only when the shard had no accepted bundle, and the
        condition on the shard makes that exact under any interleaving."""
        replacing = previous is not None and previous.upload_id is not None
        values = {
            ":arrived": ARRIVED, ":u": shard.upload_id, ":k": shard.key, ":size": shard.size,
            ":b": shard.benchmarks, ":pids": shard.pids,
            ":at": shard.arrived_at, ":req": requested_at, ":one": 1, ":exp": self._expires_at(),
            ":label": shard.label, ":executor": shard.executor, ":gz": shard.gzipped, ":v": shard.version_id,
            ":norm": shard.normalized,
        }
        if replacing:
            values[":prev"] = previous.upload_id
        shard_update = {
            "TableName": self.table, "Key": self._key(project, run_id, f"SHARD#{shard.name}"),
            "UpdateExpression": (
                "SET #state = :arrived, upload_id = :u, #key = :k, #size = :size, benchmarks = :b, "
                "pids = :pids, arrived_at = :at, requested_at = :req, "
                "label = :label, executor = :executor, gzipped = :gz, version_id = :v, normalized = :norm, "
                "expires_at = if_not_exists(expires_at, :exp) REMOVE reason, inherited_from ADD attempt :one, rev :one"
            ),
            "ConditionExpression": "upload_id = :prev AND requested_at < :req" if replacing
            else "attribute_not_exists(upload_id)",
            "ExpressionAttributeNames": {"#state": "state", "#key": "key", "#size": "size"},
            "ExpressionAttributeValues": _dump(values),
        }
        run_update = {
            "TableName": self.table, "Key": self._key(project, run_id, RUN_SK),
            "UpdateExpression": "ADD rev :one, arrived_count :count", "ConditionExpression": "#state = :open",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": _dump({":one": 1, ":count": 0 if replacing else 1, ":open": OPEN}),
        }
        names, results = _within(BENCHMARKS_ITEM_BYTES, shard.benchmark_names, shard.results)
        names = {"pk": _pk(project, run_id), "sk": f"{BENCHMARKS_PREFIX}{shard.name}", "upload_id": shard.upload_id,
                 "names": names, "results": json.dumps(results, separators=(",", ":")), "expires_at": self._expires_at()}
        codes = _transact(self.db, [{"Update": shard_update}, {"Update": run_update},
                                    {"Put": {"TableName": self.table, "Item": _dump(names)}}], self.sleep)
        if codes is None:
            return "recorded"
        return "run_not_open" if codes[1] == CONDITION_FAILED else "changed"

    def record_rejection(self, project: str, run_id: str, name: str, upload_id: str, reason: str) -> bool:
        """Note a refused bundle; a shard that already has an accepted bundle keeps it."""
        return self._shard_note(
            project, run_id, name, upload_id,
            "SET #state = if_not_exists(#state, :rejected), reason = :r, noted_upload = :u, "
            "expires_at = if_not_exists(expires_at, :exp) ADD rev :one",
            {":rejected": REJECTED, ":r": reason},
        )

    def copy_upload_metadata(self, project: str, earlier: str, run_id: str, upload_id: str) -> None:
        """An upload's CodSpeed metadata, beside the run's next attempt that counts its bundle."""
        meta = self.upload_metadata(project, earlier, upload_id)
        if meta is not None:
            self.db.put_item(TableName=self.table, Item=_dump({
                "pk": _pk(project, run_id), "sk": f"{META_PREFIX}{upload_id}", "metadata": json.dumps(meta),
                "expires_at": self._expires_at()}))

    def record_late(self, project: str, run_id: str, shard: ShardRecord, reason: str) -> bool:
        """Note a bundle that arrived after finalizing: shown in this run, counted in its next attempt."""
        return self._shard_note(
            project, run_id, shard.name, shard.upload_id,
            "SET #state = if_not_exists(#state, :late), reason = :r, noted_upload = :u, "
            "late_key = :k, arrived_at = if_not_exists(arrived_at, :at), expires_at = if_not_exists(expires_at, :exp) "
            "ADD rev :one",
            {":late": LATE, ":r": reason, ":k": shard.key, ":at": shard.arrived_at},
        )

    def _shard_note(self, project, run_id, name, upload_id, expression, values) -> bool:
        shard_update = {
            "TableName": self.table, "Key": self._key(project, run_id, f"SHARD#{name}"),
            "UpdateExpression": expression,
            "ConditionExpression": "(attribute_not_exists(noted_upload) OR noted_upload <> :u) "
                                   "AND (attribute_not_exists(upload_id) OR upload_id <> :u)",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": _dump({**values, ":u": upload_id, ":one": 1, ":exp": self._expires_at()}),
        }
        run_update = {
            "TableName": self.table, "Key": self._key(project, run_id, RUN_SK),
            "UpdateExpression": "ADD rev :one", "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": _dump({":one": 1}),
        }
        return _transact(self.db, [{"Update": shard_update}, {"Update": run_update}], self.sleep) is None

    def request_close(self, project: str, run_id: str, skip: list[str], reason: str) -> bool:
        """Mark an open run closed by hand (first close wins); False when it was not open or already closing."""
        return self._update_run(
            project, run_id,
            "SET close_requested = :true, skipped = :skip, close_reason = :reason ADD rev :one, run_changes :one",
            "#state = :open AND attribute_not_exists(close_requested)",
            {":true": True, ":skip": skip, ":reason": reason, ":open": OPEN},
        )

    def claim_finalize(self, project: str, run_id: str, now: int, lease_seconds: int) -> bool:
        """Take the run for finalizing: once, unless an earlier finalizer's lease ran out or its forward failed."""
        return self._update_run(
            project, run_id,
            "SET #state = :finalizing, lease_until = :lease, open_pk = :stalled, deadline_at = :lease "
            "ADD rev :one, run_changes :one",
            "#state = :open OR #state = :failed OR (#state = :finalizing AND lease_until < :now)",
            {":finalizing": FINALIZING, ":failed": FORWARD_FAILED, ":open": OPEN, ":stalled": FINALIZING_PK,
             ":lease": now + lease_seconds, ":now": now},
        )

    def record_plan(self, project: str, run_id: str, plan: dict) -> bool:
        """What the claiming finalizer decided (the baseline run, the number of uploads): every
        part's finalizer makes the same plan from it."""
        return self._update_run(project, run_id, "SET #plan = :plan ADD rev :one, run_changes :one",
                                "#state = :finalizing", {":plan": json.dumps(plan), ":finalizing": FINALIZING},
                                names={"#plan": "plan"})

    def claim_part(self, project: str, run_id: str, index: int, now: int, lease_seconds: int) -> bool:
        """Take one upload of a finalizing run: once, unless its finalizer's lease ran out. The
        run's lease moves on with it, so the sweeper leaves a run alone while any part is worked on."""
        claim = {
            "TableName": self.table, "Key": self._key(project, run_id, f"{PART_PREFIX}claim#{index:06d}"),
            "UpdateExpression": "SET lease_until = :lease, expires_at = :exp",
            "ConditionExpression": "attribute_not_exists(lease_until) OR lease_until < :now",
            "ExpressionAttributeValues": _dump({":lease": now + lease_seconds, ":now": now, ":exp": self._expires_at()}),
        }
        run_update = {
            "TableName": self.table, "Key": self._key(project, run_id, RUN_SK),
            "UpdateExpression": "SET lease_until = :lease, deadline_at = :lease ADD rev :one, run_changes :one",
            "ConditionExpression": "#state IN (:finalizing, :failed) AND attribute_exists(#plan)",
            "ExpressionAttributeNames": {"#state": "state", "#plan": "plan"},
            "ExpressionAttributeValues": _dump({":lease": now + lease_seconds, ":one": 1, ":finalizing": FINALIZING,
                                                ":failed": FORWARD_FAILED}),
        }
        return _transact(self.db, [{"Update": claim}, {"Update": run_update}], self.sleep) is None

    def release_part(self, project: str, run_id: str, index: int) -> None:
        """A part's finalizer failed: its retry may take the part at once."""
        self.db.update_item(TableName=self.table, Key=self._key(project, run_id, f"{PART_PREFIX}claim#{index:06d}"),
                            UpdateExpression="SET lease_until = :zero", ExpressionAttributeValues=_dump({":zero": 0}))

    def record_announced_part(self, project: str, run_id: str, index: int, answer: dict) -> bool:
        """Remember the upstream's answer to upload ``index``'s POST, before its PUT."""
        return self._record_part("announced", project, run_id, index, answer)

    def record_forwarded_part(self, project: str, run_id: str, index: int, answer: dict) -> bool:
        """Remember that upload ``index`` of a run reached the upstream, so a retry skips it."""
        return self._record_part("forwarded", project, run_id, index, answer)

    def _record_part(self, kind: str, project: str, run_id: str, index: int, answer: dict) -> bool:
        """The part's own item, written with the run's revision by the finalizer holding the claim
        (a run of a thousand walltime shards has a thousand parts: never in the run item)."""
        part = {"pk": _pk(project, run_id), "sk": f"{PART_PREFIX}{kind}#{index:06d}", "answer": json.dumps(answer),
                "expires_at": self._expires_at()}
        run_update = {
            "TableName": self.table, "Key": self._key(project, run_id, RUN_SK),
            # a part that failed made the run forward_failed: the parts still running are recorded all the same
            "UpdateExpression": "ADD rev :one, run_changes :one", "ConditionExpression": "#state IN (:finalizing, :failed)",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": _dump({":one": 1, ":finalizing": FINALIZING, ":failed": FORWARD_FAILED}),
        }
        return _transact(self.db, [{"Put": {"TableName": self.table, "Item": _dump(part)}}, {"Update": run_update}],
                         self.sleep) is None

    def finish(self, project: str, run_id: str, state: str, upstream: dict | None = None,
               error: str | None = None, outcome: dict | None = None) -> bool:
        """Record how finalizing ended (or, for a run of parts, how one part failed): only a
        finalizer holding the run or one of its parts can, once the run is forwarded no more."""
        return self._update_run(
            project, run_id,
            "SET #state = :s, upstream = :up, forward_error = :err, outcome = :outcome, lease_until = :zero "
            "REMOVE open_pk ADD rev :one, run_changes :one",
            "#state IN (:finalizing, :failed)",
            {":s": state, ":up": upstream, ":err": error, ":outcome": outcome or {}, ":zero": 0, ":finalizing": FINALIZING,
             ":failed": FORWARD_FAILED},
        )

    def touch(self, project: str, run_id: str) -> bool:
        """A change that changes nothing but the revision: the next report gets a new version."""
        return self._update_run(project, run_id, "ADD rev :one, run_changes :one", "attribute_exists(sk)", {})

    def record_baseline(self, project: str, branch: str, run_id: str, commit: str | None, at: float) -> None:
        """Remember a run forwarded on a branch: later runs carry results from, and compare with, it.
        Sorted by the microsecond it was forwarded at (two runs forwarded within one second must
        not fall back to the order of their ids)."""
        item = {"pk": f"BASELINE#{project}#{branch}", "sk": f"{at:017.6f}#{run_id}", "run_id": run_id, "commit": commit,
                "expires_at": self._expires_at()}
        self.db.put_item(TableName=self.table, Item=_dump(item))

    def latest_baseline(self, project: str, branch: str) -> str | None:
        """The run id of the latest run forwarded on ``branch``, or None."""
        page = self.db.query(
            TableName=self.table, KeyConditionExpression="pk = :pk", ScanIndexForward=False, Limit=1,
            ExpressionAttributeValues=_dump({":pk": f"BASELINE#{project}#{branch}"}),
        )
        return _load(page["Items"][0])["run_id"] if page["Items"] else None

    def _update_run(self, project, run_id, expression, condition, values, names=None) -> bool:
        names = {**({"#state": "state"} if "#state" in expression + condition else {}), **(names or {})}
        try:
            self.db.update_item(
                TableName=self.table, Key=self._key(project, run_id, RUN_SK),
                UpdateExpression=expression, ConditionExpression=f"attribute_exists(pk) AND ({condition})",
                **({"ExpressionAttributeNames": names} if names else {}),
                ExpressionAttributeValues=_dump({**values, ":one": 1}),
            )
            return True
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise

    @staticmethod
    def _key(project: str, run_id: str, sk: str) -> dict:
        return _dump({"pk": _pk(project, run_id), "sk": sk})


def _run_from(item: dict) -> RunRecord:
    identity = item.get("identity")
    return RunRecord(
        project=item["project"], run_id=item["run_id"], manifest=Manifest.from_item(item.get("manifest")),
        state=item["state"], commit=item.get("commit"), ref=item.get("ref"), base_ref=item.get("base_ref"),
        identity=json.loads(identity) if identity else None, created_at=item.get("created_at", ""),
        deadline_at=item.get("deadline_at", 0), rev=item.get("rev", 0), run_changes=item.get("run_changes", 0),
        skipped=tuple(item.get("skipped") or ()), close_reason=item.get("close_reason"),
        upstream=item.get("upstream"), forward_error=item.get("forward_error"), lease_until=item.get("lease_until", 0),
        arrived_count=item.get("arrived_count", 0),
        outcome=item.get("outcome") or {}, attempt=item.get("run_attempt", 1), variants=tuple(sorted(item.get("variants") or ())),
        closing=bool(item.get("close_requested")), ci_url=item.get("ci_url"),
        plan=json.loads(item["plan"]) if item.get("plan") else None,
    )


def _shard_from(item: dict) -> ShardRecord:
    return ShardRecord(
        name=item["sk"].removeprefix("SHARD#"), state=item["state"], attempt=item.get("attempt", 0),
        upload_id=item.get("upload_id"), key=item.get("key"), size=item.get("size"),
        benchmarks=item.get("benchmarks"),
        pids=item.get("pids") or [], arrived_at=item.get("arrived_at"), reason=item.get("reason"),
        rev=item.get("rev", 0), noted_upload=item.get("noted_upload"), requested_at=item.get("requested_at"),
        label=item.get("label"), executor=item.get("executor") or "valgrind", gzipped=item.get("gzipped", True),
        inherited_from=item.get("inherited_from"), version_id=item.get("version_id"),
        normalized=item.get("normalized"),
    )


def _upload_from(item: dict) -> UploadRecord:
    return UploadRecord(
        shard=item["shard"], upload_id=item["upload_id"], size=item.get("size"),
        requested_at=item["requested_at"], label=item.get("label"), executor=item.get("executor") or "valgrind",
    )
