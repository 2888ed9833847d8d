"""Comment items: the sticky comment of a pull request (one per pull request, whatever its runs),
its id once posted, the run and report version it shows, and the pull request's runs it has shown.
In a partition of the project's own that no run has (no run id starts with ``~``)."""

from botocore.exceptions import ClientError

from ...domain.pr_comment import Shown
from .codec import COMMENT_PREFIX, TableItems, condition_failed, dump, load

PULL_REQUESTS = "~pull-requests"


class Comments(TableItems):
    def _key(self, project: str, number: int) -> dict:
        return self.key(project, PULL_REQUESTS, f"{COMMENT_PREFIX}{number}")

    def comment(self, project: str, number: int) -> dict | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(project, number), ConsistentRead=True).get("Item")
        return load(item) if item else None

    def claim(self, project: str, number: int, now: float, stale_before: float) -> bool:
        """Take the posting of the comment: once, unless whoever took it posted nothing by
        ``stale_before`` (it died between its claim and its POST)."""
        return self._write(project, number, "SET claimed_at = :now, expires_at = :exp",
                           "attribute_not_exists(pk) OR (attribute_not_exists(comment_id) AND claimed_at < :stale)",
                           {":now": now, ":stale": stale_before, ":exp": self.expires_at()})

    def release(self, project: str, number: int, claimed_at: float) -> bool:
        """Give up a claim whose post failed, so that the next report posts the comment at once
        instead of after the claim's time (the final report among them)."""
        return self._write(project, number, "SET claimed_at = :free", "attribute_not_exists(comment_id) AND "
                           "claimed_at = :mine", {":free": 0, ":mine": claimed_at})

    def posted(self, project: str, number: int, comment_id: int, shown: Shown, now: float) -> None:
        self._write(project, number, "SET comment_id = :id, #run = :r, opened = :o, version = :v, edited_at = :now, "
                    "runs = :runs", "attribute_exists(pk)",
                    {":id": comment_id, ":r": shown.run, ":o": shown.opened, ":v": shown.version, ":now": now,
                     ":runs": {shown.run: shown.entry()}}, {"#run": "run"})

    def take_edit(self, project: str, number: int, shown: Shown, now: float, quiet_since: float | None) -> bool:
        """Take the edit that shows ``shown``: a later version of the run the comment shows, or a
        newer run's (opened later), never an older one; and (for a partial report, ``quiet_since``)
        only when the comment was last edited before then."""
        condition = ("attribute_exists(comment_id) AND ((#run = :r AND version < :v) OR opened < :o "
                     "OR (opened = :o AND #run < :r))")
        values = {":r": shown.run, ":o": shown.opened, ":v": shown.version, ":now": now, ":entry": shown.entry()}
        if quiet_since is not None:
            condition += " AND edited_at <= :quiet"
            values[":quiet"] = quiet_since
        return self._write(project, number, "SET #run = :r, opened = :o, version = :v, edited_at = :now, "
                           "runs.#shown = :entry", condition, values, {"#run": "run", "#shown": shown.run})

    def _write(self, project, number, expression, condition, values, names=None) -> bool:
        values = {k: int(v) if isinstance(v, float) else v for k, v in values.items()}  # times: whole seconds
        try:
            self.db.update_item(TableName=self.table, Key=self._key(project, number), UpdateExpression=expression,
                                ConditionExpression=condition, ExpressionAttributeValues=dump(values),
                                **({"ExpressionAttributeNames": names} if names else {}))
            return True
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
