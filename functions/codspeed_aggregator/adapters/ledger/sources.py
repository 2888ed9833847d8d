"""Kept-source items: the shards a run of a branch carried, copied beside it (``KeptSource``), by
name; out of the run's snapshots, read when a later run of the branch looks for a shard's source."""

import json
from dataclasses import asdict

from ...domain.records import KeptSource, ShardRecord
from .codec import KEPT_PREFIX, TableItems, dump, run_pk


class Sources(TableItems):
    def keep(self, project: str, run_id: str, kept: KeptSource) -> None:
        self.db.put_item(
            TableName=self.table,
            Item=dump(
                {
                    "pk": run_pk(project, run_id),
                    "sk": f"{KEPT_PREFIX}{kept.shard.name}",
                    "shard": json.dumps(asdict(kept.shard)),
                    "source_run": kept.run_id,
                    "source_commit": kept.commit,
                    "kept_at": int(kept.kept_at),
                    "expires_at": self.expires_at(),
                }
            ),
        )

    def kept(self, project: str, run_id: str) -> dict[str, KeptSource]:
        """The shards ``run_id`` keeps copies of, by name."""
        items = self.query_run(project, run_id, "begins_with(sk, :kept)", {":kept": KEPT_PREFIX})
        return {
            item["sk"].removeprefix(KEPT_PREFIX): KeptSource(
                ShardRecord.from_item(json.loads(item["shard"])),
                item["source_run"],
                item.get("source_commit"),
                item["kept_at"],
            )
            for item in items
        }
