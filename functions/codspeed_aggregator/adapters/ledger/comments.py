"""Comment items: the sticky comment of a pull request on its host (one per host, project and
number, whatever its runs), its id once posted, the run and report version it shows, and the pull
request's runs it has shown. In a partition of the project's own that no run has (no run id starts
with ``~``). Every write moves the item's expiry on: a pull request keeps its one comment however
long it lives."""

from __future__ import annotations

from typing import Any

from ...domain.pr_comment import PullRequestRef, Shown
from .codec import COMMENT_PREFIX, TableItems, load

PULL_REQUESTS = "~pull-requests"


class Comments(TableItems):
    def _key(self, pr: PullRequestRef) -> dict[str, Any]:
        return self.key(pr.project, PULL_REQUESTS, f"{COMMENT_PREFIX}{pr.host}#{pr.number}")

    def comment(self, pr: PullRequestRef) -> dict[str, Any] | None:
        item = self.db.get_item(TableName=self.table, Key=self._key(pr), ConsistentRead=True).get("Item")
        return load(item) if item else None

    def claim(self, pr: PullRequestRef, now: float, stale_before: float) -> bool:
        """Take the posting of the comment: once, unless whoever took it posted nothing by
        ``stale_before`` (it died between its claim and its POST)."""
        return self._write(
            pr,
            "SET claimed_at = :now",
            "attribute_not_exists(pk) OR (attribute_not_exists(comment_id) AND claimed_at < :stale)",
            {":now": now, ":stale": stale_before},
        )

    def release(self, pr: PullRequestRef, claimed_at: float) -> bool:
        """Give up a claim whose post failed, so that the next report posts the comment at once
        instead of after the claim's time (the final report among them)."""
        return self._write(
            pr,
            "SET claimed_at = :free",
            "attribute_not_exists(comment_id) AND claimed_at = :mine",
            {":free": 0, ":mine": claimed_at},
        )

    def take_repost(self, pr: PullRequestRef, deleted: int, now: float) -> bool:
        """Take the posting anew of the comment ``deleted`` (a person deleted it): once, whoever else
        found it gone; the item is claimed as for a first post until the new one is recorded."""
        return self._write(
            pr, "REMOVE comment_id SET claimed_at = :now", "comment_id = :gone", {":now": now, ":gone": deleted}
        )

    def posted(self, pr: PullRequestRef, comment_id: int, shown: Shown, now: float) -> None:
        self._write(
            pr,
            "SET comment_id = :id, #run = :r, opened = :o, version = :v, edited_at = :now, runs = :runs",
            "attribute_exists(pk)",
            {
                ":id": comment_id,
                ":r": shown.run,
                ":o": shown.opened,
                ":v": shown.version,
                ":now": now,
                ":runs": {shown.run: shown.entry()},
            },
            {"#run": "run"},
        )

    def take_edit(self, pr: PullRequestRef, shown: Shown, now: float, quiet_since: float | None) -> bool:
        """Take the edit that shows ``shown``: a later version of the run the comment shows, or a
        newer run's (opened later), never an older one; and (for a partial report, ``quiet_since``)
        only when the comment was last edited before then."""
        condition = (
            "attribute_exists(comment_id) AND ((#run = :r AND version < :v) OR opened < :o "
            "OR (opened = :o AND #run < :r))"
        )
        values = {":r": shown.run, ":o": shown.opened, ":v": shown.version, ":now": now, ":entry": shown.entry()}
        if quiet_since is not None:
            condition += " AND edited_at <= :quiet"
            values[":quiet"] = quiet_since
        return self._write(
            pr,
            "SET #run = :r, opened = :o, version = :v, edited_at = :now, runs.#shown = :entry",
            condition,
            values,
            {"#run": "run", "#shown": shown.run},
        )

    def _write(
        self,
        pr: PullRequestRef,
        expression: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> bool:
        """One conditional write of the item, which moves its expiry on (the pull request still lives)."""
        values = {k: int(v) if isinstance(v, float) else v for k, v in values.items()}  # times: whole seconds
        values = {**values, ":exp": self.expires_at()}
        return self.update_if(
            self.item_update(self._key(pr), f"{expression}, expires_at = :exp", condition, values, names)
        )
