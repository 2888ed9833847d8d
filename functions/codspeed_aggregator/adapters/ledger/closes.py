"""A run's close on its item: the uploads it was granted, the close asked and what it speaks for,
what the close waits for and what it gave up on."""

from __future__ import annotations

from ...domain.closing import Awaiting, CiOrigin
from ...domain.records import OPEN
from .codec import TableItems
from .run_item import attribute, stored

CLOSING, BY, AWAITING = (attribute(f"close.{name}") for name in ("requested", "by", "awaiting"))


class Closes(TableItems):
    def count_grant(self, project: str, run_id: str, most: int | None = None, closing: bool = False) -> bool:
        """Count an upload granted in the run, before its upload item is written (a grant whose count
        failed leaves nothing a close waits for): the close's barrier claims the run only at the count it
        read. False when the run is no longer open or a close was asked (the upload goes to its next
        attempt), or it counts ``most`` already. ``closing``: an upload of the closing run's own CI attempt,
        taken while it is open (its close decides by the CI's word whether to wait for it). No revision:
        nothing a report shows changes."""
        capped = " AND (attribute_not_exists(grants) OR grants < :most)" if most is not None else ""
        unclosed = "" if closing else f" AND attribute_not_exists({CLOSING})"
        return self.update_run(
            project,
            run_id,
            "ADD grants :one",
            f"#state = :open{unclosed}{capped}",
            {":open": OPEN} | ({":most": most} if most is not None else {}),
        )

    def request_close(self, project: str, run_id: str, skip: list[str], origin: CiOrigin | None = None) -> bool:
        """Mark an open run closed (first close wins), adding ``skip`` to the shards it skips (an
        attempt starts with its previous one's), with the CI run and attempt the close speaks for
        (``origin``: their jobs have ended); False when it was not open or already closing."""
        skips = ", skipped = list_append(if_not_exists(skipped, :none), :skip)" if skip else ""
        said = stored("close.by", origin)
        by = f", {BY} = :by" if said else ""
        return self.update_run(
            project,
            run_id,
            f"SET {CLOSING} = :true{skips}{by} ADD rev :one, run_changes :one",
            f"#state = :open AND attribute_not_exists({CLOSING})",
            {":true": True, ":open": OPEN}
            | ({":skip": skip, ":none": []} if skip else {})
            | ({":by": said} if said else {}),
        )

    def note_workflow_ended(self, project: str, run_id: str, origin: CiOrigin) -> bool:
        """The CI's webhook said every job of ``origin``'s attempt ended, once the run had ended without it
        (complete by count): an attempt opened after it is a later CI attempt's. False when the run is open."""
        return self.update_run(
            project,
            run_id,
            f"SET {BY} = :by ADD rev :one, run_changes :one",
            "#state <> :open",
            {":by": stored("close.by", origin), ":open": OPEN},
        )

    def note_awaiting(self, project: str, run_id: str, awaiting: Awaiting | None) -> bool:
        """What the closing run waits for, as its report says it (None: nothing more); False when the
        run is no longer open."""
        change = f"SET {AWAITING} = :a" if awaiting else f"REMOVE {AWAITING}"
        return self.update_run(
            project,
            run_id,
            f"{change} ADD rev :one, run_changes :one",
            "#state = :open",
            {":open": OPEN} | ({":a": stored("close.awaiting", awaiting)} if awaiting else {}),
        )

    def give_up(self, project: str, run_id: str, shard: str, reason: str) -> bool:
        """A shard whose bundle is in the bucket and whose arrival failed when the close counted it: the
        close goes on without it, and the report says why. False when the run is no longer open."""
        for expression, condition, values in (
            ("SET given_up.#shard = :why", "attribute_exists(given_up)", {":why": reason}),
            ("SET given_up = :whys", "attribute_not_exists(given_up)", {":whys": {shard: reason}}),
        ):
            if self.update_run(
                project,
                run_id,
                f"{expression} ADD rev :one, run_changes :one",
                f"#state = :open AND {condition}",
                {":open": OPEN, **values},
                names={"#shard": shard} if "#shard" in expression else None,
            ):
                return True
        return False
