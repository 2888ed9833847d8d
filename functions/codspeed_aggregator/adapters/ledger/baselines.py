"""Baseline items: the runs forwarded on each branch, the latest last; later runs carry results
from, and compare with, them."""

from typing import Any

from botocore.exceptions import ClientError

from .codec import TableItems, condition_failed, dump, load, run_pk

COSTS_SK = "~COSTS"  # beside a run (every attempt's), out of its snapshots: whose costs split its shards


class Baselines(TableItems):
    def record_baseline(self, project: str, branch: str, run_id: str, commit: str | None, at: float) -> None:
        """Remember a run forwarded whole on a branch: later runs carry from, and compare with, it."""
        self._record(f"BASELINE#{project}#{branch}", run_id, at, commit=commit)

    def record_forwarded(self, project: str, branch: str, run_id: str, at: float) -> None:
        """Remember a run forwarded on a branch, whole or with shards missing: what each benchmark
        last cost is read from the latest of them (a baseline is a whole run only)."""
        self._record(f"FORWARDED#{project}#{branch}", run_id, at)

    def _record(self, pk: str, run_id: str, at: float, **extra: Any) -> None:
        """Sorted by the microsecond it was forwarded at (two runs forwarded within one second must
        not fall back to the order of their ids)."""
        self.db.put_item(
            TableName=self.table,
            Item=dump(
                {"pk": pk, "sk": f"{at:017.6f}#{run_id}", "run_id": run_id, **extra, "expires_at": self.expires_at()}
            ),
        )

    def _latest(self, pk: str, limit: int) -> list[str]:
        page = self.db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ScanIndexForward=False,
            Limit=limit,
            ExpressionAttributeValues=dump({":pk": pk}),
        )
        return [load(item)["run_id"] for item in page["Items"]]

    def baseline_for(self, project: str, branch: str, commits: tuple[str, ...]) -> str | None:
        """The run a change compares with: the branch's latest run forwarded at the first of
        ``commits`` that has one (the change's base commit, then its ancestors, the nearest
        first), else the branch's latest."""
        if commits:
            values = {f":c{i}": commit.lower() for i, commit in enumerate(commits)}
            found = self.query_all(
                KeyConditionExpression="pk = :pk",
                ScanIndexForward=False,
                FilterExpression=f"#commit IN ({', '.join(values)})",
                ExpressionAttributeNames={"#commit": "commit"},
                ExpressionAttributeValues=dump({":pk": f"BASELINE#{project}#{branch}", **values}),
            )
            latest: dict[str, str] = {}
            for item in found:  # the latest first
                latest.setdefault(item["commit"], item["run_id"])
            for commit in values.values():
                if commit in latest:
                    return latest[commit]
        return self.latest_baseline(project, branch)

    def forwarded_runs(self, project: str, branch: str, limit: int) -> list[str]:
        """Up to ``limit`` runs forwarded on ``branch``, whole or not, the latest first."""
        return self._latest(f"FORWARDED#{project}#{branch}", limit)

    def earlier_runs(self, project: str, branch: str, run_id: str, limit: int) -> list[str]:
        """Up to ``limit`` runs forwarded on ``branch`` before ``run_id``, the latest first (where
        a shard the baseline run did not receive was last received)."""
        found: list[str] = []
        seen = False
        for page in self.db.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ScanIndexForward=False,
            ExpressionAttributeValues=dump({":pk": f"BASELINE#{project}#{branch}"}),
        ):
            for item in map(load, page["Items"]):
                if seen and len(found) < limit:
                    found.append(item["run_id"])
                seen = seen or item["run_id"] == run_id
            if len(found) >= limit:
                break
        return found

    def latest_baseline(self, project: str, branch: str) -> str | None:
        """The run id of the latest run forwarded whole on ``branch``, or None."""
        return next(iter(self._latest(f"BASELINE#{project}#{branch}", 1)), None)

    def pin_costs(self, project: str, run_id: str, sources: list[str]) -> list[str]:
        """Make ``sources`` the runs whose costs split run ``run_id``'s shards, unless some were pinned
        first (another shard's split, a re-run's): answers the pinned ones. Every split of a run, its
        re-runs included, then gives each shard the same benchmarks, whatever the branch forwards meanwhile."""
        key = {"pk": run_pk(project, run_id), "sk": COSTS_SK}
        try:
            self.db.put_item(
                TableName=self.table,
                Item=dump({**key, "sources": sources, "expires_at": self.expires_at()}),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return sources
        except ClientError as exc:
            if not condition_failed(exc):
                raise
        return self.costs_pinned(project, run_id) or sources

    def costs_pinned(self, project: str, run_id: str) -> list[str] | None:
        item = self.db.get_item(
            TableName=self.table, Key=dump({"pk": run_pk(project, run_id), "sk": COSTS_SK}), ConsistentRead=True
        ).get("Item")
        return list(load(item)["sources"]) if item else None
