"""Comment items: the sticky pull-request comment of a run (every attempt's), its id once posted,
and the last report version it shows. Beside the run's first attempt, out of snapshots."""

from botocore.exceptions import ClientError

from ...domain.ledger import base_run_id
from .codec import COMMENT_PREFIX, TableItems, condition_failed, dump, load


class Comments(TableItems):
    def _key(self, project: str, run_id: str, number: int) -> dict:
        return self.key(project, base_run_id(run_id), f"{COMMENT_PREFIX}{number}")

    def comment(self, project: str, run_id: str, number: int) -> dict | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(project, run_id, number), ConsistentRead=True).get("Item")
        return load(item) if item else None

    def claim(self, project: str, run_id: str, number: int, now: float, stale_before: float) -> bool:
        """Take the posting of the comment: once, unless whoever took it posted nothing by
        ``stale_before`` (it died between its claim and its POST)."""
        return self._write(project, run_id, number, "SET claimed_at = :now, expires_at = :exp",
                           "attribute_not_exists(pk) OR (attribute_not_exists(comment_id) AND claimed_at < :stale)",
                           {":now": now, ":stale": stale_before, ":exp": self.expires_at()})

    def release(self, project: str, run_id: str, number: int, claimed_at: float) -> bool:
        """Give up a claim whose post failed, so that the next report posts the comment at once
        instead of after the claim's time (the final report among them)."""
        return self._write(project, run_id, number, "SET claimed_at = :free", "attribute_not_exists(comment_id) AND "
                           "claimed_at = :mine", {":free": 0, ":mine": claimed_at})

    def posted(self, project: str, run_id: str, number: int, comment_id: int, version: int, now: float) -> None:
        self._write(project, run_id, number, "SET comment_id = :id, version = :v, edited_at = :now", "attribute_exists(pk)",
                    {":id": comment_id, ":v": version, ":now": now})

    def take_edit(self, project: str, run_id: str, number: int, version: int, now: float,
                  quiet_since: float | None) -> bool:
        """Take the edit that shows report ``version``: never over a newer one, and (for a partial
        report, ``quiet_since``) only when the comment was last edited before then."""
        condition = "attribute_exists(comment_id) AND version < :v"
        values = {":v": version, ":now": now}
        if quiet_since is not None:
            condition += " AND edited_at <= :quiet"
            values[":quiet"] = quiet_since
        return self._write(project, run_id, number, "SET version = :v, edited_at = :now", condition, values)

    def _write(self, project, run_id, number, expression, condition, values) -> bool:
        values = {k: int(v) if isinstance(v, float) else v for k, v in values.items()}  # times: whole seconds
        try:
            self.db.update_item(TableName=self.table, Key=self._key(project, run_id, number), UpdateExpression=expression,
                                ConditionExpression=condition, ExpressionAttributeValues=dump(values))
            return True
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
