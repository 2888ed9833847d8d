"""Part items: one upload of a run forwarded in several, its claim and what the upstream answered."""

import json
from typing import Any

from ...domain.part_answers import Announced, Delivered
from ...domain.records import FINALIZING, FORWARD_FAILED, OPEN, ShardRecord, ShardSent
from .codec import ANNOUNCED, CLAIM_PREFIX, FORWARDED_PART, PART_PREFIX, RUN_SK, SHARD_PREFIX, TableItems, dump, run_pk
from .runs import LEASE, PLAN


class Parts(TableItems):
    def claim_part(self, project: str, run_id: str, part: str, now: int, lease_seconds: int) -> bool:
        """Take one upload (``part``: its claim, ``domain.uploads.claim_id``) of a finalizing run: once,
        unless its finalizer's lease ran out. One transaction on the part's claim item and the run
        item: the run's lease moves on with it, so neither the sweeper nor a retry takes the run
        again while any part is worked on."""
        claim = self._claim(project, run_id, part, now, lease_seconds)
        run_update = self.run_update(
            project,
            run_id,
            f"SET {LEASE} = :lease, deadline_at = :lease ADD rev :one, run_changes :one",
            "#state IN (:finalizing, :failed) AND attribute_exists(#plan)",
            {":lease": now + lease_seconds, ":finalizing": FINALIZING, ":failed": FORWARD_FAILED},
            names={"#plan": PLAN},
        )
        return self.transact([{"Update": claim}, {"Update": run_update}]) is None

    def claim_shard(self, project: str, run_id: str, part: str, now: int, lease_seconds: int) -> bool:
        """Take one shard of a parts run (``part``: its claim, as a finalizer claims it) while the
        run is open: two deliveries of one arrival, two versions of the shard, or an arrival and the
        run's finalizer, never send it at once (the finalizer claims it under the same item)."""
        claim = self._claim(project, run_id, part, now, lease_seconds)
        is_open = {
            "TableName": self.table,
            "Key": self.key(project, run_id, RUN_SK),
            "ConditionExpression": "#state = :open",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": dump({":open": OPEN}),
        }
        return self.transact([{"Update": claim}, {"ConditionCheck": is_open}]) is None

    def record_sent_shard(self, project: str, run_id: str, shard: ShardRecord, claim: str, sent: ShardSent) -> bool:
        """Remember on a parts run's shard how its send went (``sent``), at the version sent, and release ``claim``:
        a change of the shard (its tally noted), so reports see it and the run's item stays as it
        was. False: the shard was re-pushed meanwhile, and the claim is still held (for its sender
        to send the newer version next)."""
        shard_update = {
            "TableName": self.table,
            "Key": self.key(project, run_id, f"{SHARD_PREFIX}{shard.name}"),
            "UpdateExpression": "SET upstream = :sent ADD rev :one",
            "ConditionExpression": "version_id = :v",
            "ExpressionAttributeValues": dump({":sent": json.dumps(sent.to_item()), ":v": shard.version_id, ":one": 1}),
        }
        tally = self.tally_update(project, run_id, shard.name, "ADD rev :one", None, {})
        changes = [{"Update": shard_update}, {"Update": tally}, {"Update": self._released(project, run_id, claim)}]
        return self.transact_noted(project, run_id, shard.name, changes) is None

    def release_part(self, project: str, run_id: str, part: str) -> None:
        """A part's finalizer failed: its retry may take the part at once."""
        self.db.update_item(**self._released(project, run_id, part))

    def _claim(self, project: str, run_id: str, part: str, now: int, lease_seconds: int) -> dict[str, Any]:
        """A part's (or a parts run's shard's) claim item, taken unless its holder's lease still runs."""
        return {
            "TableName": self.table,
            "Key": self.key(project, run_id, f"{CLAIM_PREFIX}{part}"),
            "UpdateExpression": "SET lease_until = :lease, expires_at = :exp",
            "ConditionExpression": "attribute_not_exists(lease_until) OR lease_until < :now",
            "ExpressionAttributeValues": dump({":lease": now + lease_seconds, ":now": now, ":exp": self.expires_at()}),
        }

    def _released(self, project: str, run_id: str, part: str) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Key": self.key(project, run_id, f"{CLAIM_PREFIX}{part}"),
            "UpdateExpression": "SET lease_until = :zero",
            "ExpressionAttributeValues": dump({":zero": 0}),
        }

    def record_announced_part(self, project: str, run_id: str, index: int, answer: Announced) -> bool:
        """Remember the upstream's answer to upload ``index``'s POST, before its PUT."""
        return self._record_part(ANNOUNCED, project, run_id, index, answer.to_json())

    def record_forwarded_part(self, project: str, run_id: str, index: int, answer: Delivered) -> bool:
        """Remember that upload ``index`` of a run reached the upstream, so a retry skips it."""
        return self._record_part(FORWARDED_PART, project, run_id, index, answer.to_json())

    def _record_part(self, kind: str, project: str, run_id: str, index: int, answer: str) -> bool:
        """One transaction on the part's own item and the run item (its revision), by the finalizer
        holding the claim (a run of a thousand walltime shards has a thousand parts: never in the run item)."""
        part = {
            "pk": run_pk(project, run_id),
            "sk": f"{PART_PREFIX}{kind}#{index:06d}",
            "answer": answer,
            "expires_at": self.expires_at(),
        }
        # a part that failed made the run forward_failed: the parts still running are recorded all the same
        run_update = self.run_update(
            project,
            run_id,
            "ADD rev :one, run_changes :one",
            "#state IN (:finalizing, :failed)",
            {":finalizing": FINALIZING, ":failed": FORWARD_FAILED},
        )
        return self.transact([{"Put": {"TableName": self.table, "Item": dump(part)}}, {"Update": run_update}]) is None
