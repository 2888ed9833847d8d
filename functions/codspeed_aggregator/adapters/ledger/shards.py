"""Shard and upload items: the upload requests a run granted (with the CodSpeed metadata they
came with) and each shard's state, counted exactly once."""

import json
from collections import Counter
from dataclasses import asdict
from typing import Any

from botocore.exceptions import ClientError

from ...domain.arrival import Counted, given_back
from ...domain.records import ARRIVED, LATE, REJECTED, GrantRecord, SentPost, ShardRecord
from .codec import (
    CONDITION_FAILED,
    META_PREFIX,
    SHARD_PREFIX,
    TOKEN_PREFIX,
    UPLOAD_PREFIX,
    TableItems,
    condition_failed,
    dump,
    run_pk,
)
from .run_item import count_attribute

TOKEN_MARGIN = 60  # seconds a job's token must still be good for to go with its part


class Shards(TableItems):
    def add_upload(self, project: str, run_id: str, upload: GrantRecord) -> None:
        """The upload request, and beside it (out of snapshots) the CodSpeed metadata it came with.
        Two plain writes, not a transaction: nobody can upload (so nothing can arrive) before the
        grant is answered, which is after both; a grant that fails between them leaves an item
        that expires. (Half the write units of a transaction.)"""
        self.keep_metadata(project, run_id, upload.upload_id, upload.metadata or {}, upload.sent)
        self.db.put_item(
            TableName=self.table,
            Item=dump(
                {
                    "pk": run_pk(project, run_id),
                    "sk": f"{UPLOAD_PREFIX}{upload.shard}#{upload.upload_id}",
                    "shard": upload.shard,
                    "upload_id": upload.upload_id,
                    "size": upload.size,
                    "label": upload.label,
                    "executor": upload.executor,
                    "group": upload.group,
                    "requested_at": upload.requested_at,
                    "md5": upload.md5,
                    "expires_at": self.expires_at(),
                    **({"tokenless": True} if upload.tokenless else {}),
                    **({"origin": origin} if upload.origin and (origin := upload.origin.to_item()) else {}),
                }
            ),
        )

    def keep_metadata(
        self, project: str, run_id: str, upload_id: str, metadata: dict[str, Any], sent: SentPost | None = None
    ) -> None:
        """CodSpeed metadata beside a run, out of its snapshots: an upload's (by its id), or what
        the CI job that opened the run stated (``OPENED``). A runner's POST is kept as it came (its
        bytes are the metadata, read back from them), with its User-Agent."""
        # non-ASCII as it is: an escape would make one character of a 256 KiB body six or twelve bytes of the item
        kept = (
            {"post": sent.body, "user_agent": sent.user_agent}
            if sent
            else {"metadata": json.dumps(metadata, ensure_ascii=False)}
        )
        self.db.put_item(
            TableName=self.table,
            Item=dump(
                {
                    "pk": run_pk(project, run_id),
                    "sk": f"{META_PREFIX}{upload_id}",
                    **kept,
                    "expires_at": self.expires_at(),
                }
            ),
        )
        if (
            sent is not None and sent.token
        ):  # an item of its own, expiring with the token (TTL), out of every read but this
            self.db.put_item(
                TableName=self.table,
                Item=dump(
                    {
                        "pk": run_pk(project, run_id),
                        "sk": f"{TOKEN_PREFIX}{upload_id}",
                        "token": sent.token,
                        "expires_at": sent.token_expires,
                    }
                ),
            )

    def _metadata_item(self, project: str, run_id: str, upload_id: str) -> dict[str, Any] | None:
        return self.db.get_item(
            TableName=self.table, Key=self.key(project, run_id, f"{META_PREFIX}{upload_id}"), ConsistentRead=True
        ).get("Item")

    def upload_metadata(self, project: str, run_id: str, upload_id: str) -> dict[str, Any] | None:
        found = self.upload_post(project, run_id, upload_id)
        return found[0] if found else None

    def upload_post(
        self, project: str, run_id: str, upload_id: str, now: float | None = None
    ) -> tuple[dict[str, Any], SentPost | None] | None:
        """An upload's metadata, and the POST it came in when a runner sent it (pushed by the client:
        None); with ``now``, that POST carries its job's OIDC token while the token is good for a
        minute more (TTL deletes the item a day or two after it expired: an expired one is never
        used meanwhile), read in the same request."""
        sks = [f"{META_PREFIX}{upload_id}", *([f"{TOKEN_PREFIX}{upload_id}"] if now is not None else [])]
        found = {item["sk"]: item for item in self.get_many(project, run_id, sks)}
        item, token = found.get(sks[0]), found.get(f"{TOKEN_PREFIX}{upload_id}")
        if item is None:
            return None
        if "post" not in item:
            return json.loads(item["metadata"]), None
        good = token is not None and now is not None and token["expires_at"] > now + TOKEN_MARGIN
        sent = SentPost(bytes(item["post"]), item.get("user_agent"), token["token"] if good and token else None)
        return json.loads(sent.body), sent

    def copy_upload_metadata(self, project: str, earlier: str, run_id: str, upload_id: str) -> None:
        """An upload's CodSpeed metadata (its POST as sent) and its job's token (expiring as it does),
        beside the run's next attempt that counts its bundle: a part's credentials follow it."""
        item = self._metadata_item(project, earlier, upload_id)
        if item is not None:
            self.db.put_item(
                TableName=self.table,
                Item={**item, **dump({"pk": run_pk(project, run_id), "expires_at": self.expires_at()})},
            )
        token = self.db.get_item(
            TableName=self.table, Key=self.key(project, earlier, f"{TOKEN_PREFIX}{upload_id}"), ConsistentRead=True
        ).get("Item")
        if token is not None:
            self.db.put_item(TableName=self.table, Item={**token, **dump({"pk": run_pk(project, run_id)})})

    def inherit_arrived(self, project: str, earlier: str, run_id: str) -> dict[str, int]:
        """Copy the shards counted in an earlier attempt of a run (their upload metadata too; their
        results are the bundle's, in the bucket) into ``run_id``, the next attempt, before that run
        is opened; answers how many there are per job group. Each shard's copy is conditional, so one counted
        meanwhile in the new attempt
        is left as it is."""
        items = self.query_run(project, earlier, "begins_with(sk, :shard)", {":shard": SHARD_PREFIX})
        arrived = [i for i in items if i.get("state") == ARRIVED]
        for item in arrived:
            copy = {
                **item,
                "pk": run_pk(project, run_id),
                "rev": 0,
                "attempt": 0,  # its uploads in this attempt: none yet (a re-run's push is this attempt's first)
                "inherited_from": item.get("inherited_from") or earlier,
            }
            try:
                self.db.put_item(TableName=self.table, Item=dump(copy), ConditionExpression="attribute_not_exists(pk)")
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                continue
            self.copy_upload_metadata(project, earlier, run_id, item["upload_id"])
        return dict(Counter(item.get("group") or "" for item in arrived))

    def record_arrival(
        self, project: str, run_id: str, shard: ShardRecord, requested_at: str, previous: ShardRecord | None
    ) -> Counted:
        """Count an accepted bundle once, replacing ``previous`` (the shard as read) (``Counted``). One
        transaction on the shard item and its tally (``codec.tally_sk``; the shard's results are in the bucket
        already), never the run item.

        The group's count in the tally grows only when the shard had no accepted bundle, and the
        condition on the shard makes that exact under any interleaving; a tally the claim closed
        refuses it."""
        replacing = previous is not None and previous.upload_id is not None
        values = {
            ":arrived": ARRIVED,
            ":u": shard.upload_id,
            ":k": shard.key,
            ":size": shard.size,
            ":b": shard.benchmarks,
            ":pids": shard.pids,
            ":at": shard.arrived_at,
            ":req": requested_at,
            ":one": 1,
            ":exp": self.expires_at(),
            ":label": shard.label,
            ":executor": shard.executor,
            ":gz": shard.gzipped,
            ":v": shard.version_id,
            ":md5": shard.md5,
            ":norm": asdict(shard.normalized) if shard.normalized else None,
            ":group": shard.group,
            ":kept": shard.results_kept,
            ":cost": shard.cost_ms,
            ":longest": shard.longest_ms,
        }
        if replacing and previous is not None:
            values[":prev"] = previous.upload_id
        shard_update = {
            "TableName": self.table,
            "Key": self.key(project, run_id, f"{SHARD_PREFIX}{shard.name}"),
            "UpdateExpression": (
                "SET #state = :arrived, upload_id = :u, #key = :k, #size = :size, benchmarks = :b, "
                "pids = :pids, arrived_at = :at, requested_at = :req, "
                "label = :label, executor = :executor, gzipped = :gz, version_id = :v, md5 = :md5, "
                "normalized = :norm, #group = :group, "
                "results_kept = :kept, cost_ms = :cost, longest_ms = :longest, "
                "expires_at = if_not_exists(expires_at, :exp) REMOVE reason, inherited_from, upstream ADD attempt "
                ":one, rev :one"
            ),
            "ConditionExpression": "upload_id = :prev AND requested_at < :req"
            if replacing
            else "attribute_not_exists(upload_id)",
            "ExpressionAttributeNames": {"#state": "state", "#key": "key", "#size": "size", "#group": "group"},
            "ExpressionAttributeValues": dump(values),
        }
        tally = self.tally_update(
            project,
            run_id,
            shard.name,
            "ADD rev :one, #counted :count",
            "attribute_not_exists(closed)",
            {":count": 0 if replacing else 1},
            names={"#counted": count_attribute(shard.group)},
        )
        codes = self.transact_noted(project, run_id, shard.name, [{"Update": shard_update}, {"Update": tally}])
        if codes is None:
            return Counted.RECORDED
        return Counted.RUN_NOT_OPEN if codes[1] == CONDITION_FAILED else Counted.CHANGED

    def record_rejection(self, project: str, run_id: str, name: str, upload_id: str, reason: str) -> bool:
        """Note a refused bundle; a shard that already has an accepted bundle keeps it."""
        return self._shard_note(
            project,
            run_id,
            name,
            upload_id,
            "SET #state = if_not_exists(#state, :rejected), reason = :r, noted_upload = :u, "
            "expires_at = if_not_exists(expires_at, :exp) ADD rev :one",
            {":rejected": REJECTED, ":r": reason},
        )

    def record_given_back(self, project: str, run_id: str, name: str, upload_id: str, reason: str) -> bool:
        """Note a grant its client gave back: the shard rejected with why (a shard with an accepted bundle
        keeps it), once. Noted apart from the upload itself, whose bundle, should it land all the same,
        still counts (nothing accepted is lost). False when it was given back already."""
        return self.record_rejection(project, run_id, name, given_back(upload_id), reason)

    def record_late(self, project: str, run_id: str, shard: ShardRecord, reason: str) -> bool:
        """Note a bundle that arrived after finalizing: shown in this run, counted in its next attempt."""
        return self._shard_note(
            project,
            run_id,
            shard.name,
            shard.upload_id,
            "SET #state = if_not_exists(#state, :late), reason = :r, noted_upload = :u, "
            "late_key = :k, arrived_at = if_not_exists(arrived_at, :at), expires_at = if_not_exists(expires_at, :exp) "
            "ADD rev :one",
            {":late": LATE, ":r": reason, ":k": shard.key, ":at": shard.arrived_at},
        )

    def _shard_note(  # noqa: PLR0913 -- the shard, and the update its note makes
        self, project: str, run_id: str, name: str, upload_id: str | None, expression: str, values: dict[str, Any]
    ) -> bool:
        """One transaction on the shard item (noted once per upload) and its tally (its revision)."""
        shard_update = {
            "TableName": self.table,
            "Key": self.key(project, run_id, f"{SHARD_PREFIX}{name}"),
            "UpdateExpression": expression,
            "ConditionExpression": "(attribute_not_exists(noted_upload) OR noted_upload <> :u) "
            "AND (attribute_not_exists(upload_id) OR upload_id <> :u)",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": dump({**values, ":u": upload_id, ":one": 1, ":exp": self.expires_at()}),
        }
        tally = self.tally_update(project, run_id, name, "ADD rev :one", None, {})
        note = self.change_note(project, run_id, name, self.tally_rev(project, run_id, name))
        return self.transact([{"Update": shard_update}, {"Update": tally}, {"Put": note}]) is None
