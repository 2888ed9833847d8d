"""Run items: a run's record (state, manifest, close, claim, plan, outcome), the project's list
of runs, and the index of runs that are open or being finalized."""

from __future__ import annotations

from botocore.exceptions import ClientError

from codspeed_wire.report import UpstreamEntry

from ...domain.attempts import MAX_ATTEMPTS, attempt_run_id, base_run_id, named_attempt
from ...domain.manifest import Manifest
from ...domain.outcome import Outcome
from ...domain.plan_record import PlanRecord
from ...domain.records import (
    CLOSED_EMPTY,
    ENDED,
    FINALIZING,
    FORWARD_FAILED,
    FORWARDED,
    MAX_GROUPS,
    MAX_VARIANTS,
    OPEN,
    RunRecord,
)
from .codec import (
    FINALIZING_PK,
    OPEN_INDEX,
    PROJECT_PREFIX,
    RUN_SK,
    TableItems,
    condition_failed,
    dump,
    load,
    tally_sks,
)
from .items import listed_item
from .run_item import attribute, carried_items, group_attribute, run_from, run_item, stored

# what a run item calls its forward's fields (``RunForward``)
LEASE, PLAN, UPSTREAM, ERROR, OWED = (
    attribute(f"forward.{f}") for f in ("lease_until", "plan", "upstream", "error", "owed")
)


class Runs(TableItems):
    def open_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Create the run if it is new; either way answer the run as stored and whether it was created.
        Touches the run item and, when it creates the run, the project's list."""
        item = run_item(run, self.expires_at())
        try:
            self.db.put_item(
                TableName=self.table,
                Item=dump(item),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )  # the run as stored: no read after
            self.db.put_item(TableName=self.table, Item=dump(listed_item(run, self.expires_at())))
            return run, True
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            found = load(exc.response["Item"])  # type: ignore[typeddict-item]  # ReturnValuesOnConditionCheckFailure
            if found["state"] in ENDED or found.get(attribute("close.requested")):  # its next attempt goes on from its
                # revision and counts (a closing run's too: an upload after its close is the next attempt's): read whole
                return self.run_record(run.project, run.run_id) or run_from(found, []), False
            return run_from(found, []), False  # an open run as a grant needs it: its counts are not read

    def run_record(self, project: str, run_id: str) -> RunRecord | None:
        """The run's item and its tallies, in one small consistent read."""
        items = self.query_run(project, run_id, "begins_with(sk, :run)", {":run": RUN_SK})
        run = next((i for i in items if i["sk"] == RUN_SK), None)
        return run_from(run, [i for i in items if i["sk"] != RUN_SK]) if run else None

    def attempt_of(self, project: str, run_id: str) -> str:
        """The run id a request for ``run_id`` acts on: the attempt it names (``7002~2``, and
        ``7002~1`` is ``7002``), or, when it names none, the run's latest attempt (one read per
        attempt after the first)."""
        base, named = base_run_id(run_id), named_attempt(run_id)
        if named is not None:
            return attempt_run_id(base, named)
        latest = 1
        while latest < MAX_ATTEMPTS and self.db.get_item(
            TableName=self.table,
            Key=self.key(project, attempt_run_id(base, latest + 1), RUN_SK),
            ProjectionExpression="pk",
            ConsistentRead=True,
        ).get("Item"):
            latest += 1
        return attempt_run_id(base, latest)

    def recent_runs(self, project: str, limit: int) -> list[RunRecord]:
        """A project's latest runs, newest first: its list, then its run items in one batch read
        (not their tallies: the records hold no counts of shards, which the list shows none of)."""
        page = self.db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ScanIndexForward=False,
            Limit=limit,
            ExpressionAttributeValues=dump({":pk": f"{PROJECT_PREFIX}{project}"}),
        )
        ids = [load(i)["run_id"] for i in page["Items"]]
        if not ids:
            return []
        found: dict[str, RunRecord] = {}
        keys = [self.key(project, r, RUN_SK) for r in ids]
        while keys:
            answer = self.db.batch_get_item(RequestItems={self.table: {"Keys": keys[:100]}})
            for item in map(load, answer["Responses"].get(self.table, [])):
                found[item["run_id"]] = run_from(item, [])
            unprocessed = answer.get("UnprocessedKeys", {}).get(self.table)
            keys = keys[100:] + list(unprocessed["Keys"] if unprocessed else [])
        return [found[r] for r in ids if r in found]

    def open_runs_past(self, now: int) -> list[tuple[str, str]]:
        """Open runs whose deadline passed."""
        return self._indexed(OPEN, now)

    def stalled_finalizing(self, now: int) -> list[tuple[str, str]]:
        """Runs still finalizing whose finalizer's lease ran out."""
        return self._indexed(FINALIZING_PK, now)

    def _indexed(self, kind: str, now: int) -> list[tuple[str, str]]:
        items = self.query_all(
            IndexName=OPEN_INDEX,
            KeyConditionExpression="open_pk = :o AND deadline_at <= :now",
            ExpressionAttributeValues=dump({":o": kind, ":now": now}),
        )
        return [(i["project"], i["run_id"]) for i in items]

    def add_group(self, project: str, run_id: str, group: str, manifest: Manifest) -> bool:
        """Note a job group the run had not seen, with its manifest. False when the group is there
        already (read the run: its manifest stands), the run holds ``MAX_GROUPS``, or it is no longer
        open. A closing run still takes one: its close waits for every upload granted before it."""
        return self.update_run(
            project,
            run_id,
            "SET #group = :m ADD group_count :one, rev :one, run_changes :one",
            "#state = :open AND attribute_not_exists(#group) AND group_count < :most",
            {":m": manifest.to_item(), ":open": OPEN, ":most": MAX_GROUPS},
            names={"#group": group_attribute(group)},
        )

    def add_variant(self, project: str, run_id: str, variant: str) -> bool:
        """Note a kind of upload the run had not seen (another executor): its manifest now expects it
        too. False when the run is no longer open or holds ``MAX_VARIANTS``."""
        return self.update_run(
            project,
            run_id,
            "ADD variants :v, variant_count :one, rev :one, run_changes :one",
            "#state = :open AND variant_count < :most",
            {":v": {variant}, ":open": OPEN, ":most": MAX_VARIANTS},
        )

    def mark_tokenless(self, project: str, run_id: str, checked: bool) -> bool:
        """Note that an upload of the run came without a token: ``checked``, a fork's pull request as
        GitHub bore it out (``fork``: its close and report are taken without a token too); else
        unchecked (``tokenless``: the run never posts a pull-request comment). Neither run becomes a
        baseline. False when it was noted already."""
        mark = "fork" if checked else "tokenless"
        return self.update_run(
            project,
            run_id,
            f"SET {mark} = :true ADD rev :one, run_changes :one",
            f"attribute_not_exists({mark})",
            {":true": True},
        )

    def claim_finalize(self, project: str, run_id: str, now: int, lease_seconds: int, *, grants: int) -> bool:
        """Take the run for finalizing: once, unless an earlier finalizer's lease ran out or its
        forward failed; never while a part of it holds a live lease (claims move the run's lease).
        An open run is taken only while it counts ``grants`` uploads granted (what the close's barrier
        saw). The same transaction closes every tally, so no shard is counted in the run after it."""
        counted = "grants = :grants" if grants else "(attribute_not_exists(grants) OR grants = :grants)"
        claim = self.run_update(
            project,
            run_id,
            f"SET #state = :finalizing, {LEASE} = :lease, open_pk = :stalled, deadline_at = :lease "
            "ADD rev :one, run_changes :one",
            f"attribute_exists(pk) AND ((#state = :open AND {counted}) OR "
            f"((#state = :failed OR #state = :finalizing) AND {LEASE} < :now))",
            {
                ":finalizing": FINALIZING,
                ":failed": FORWARD_FAILED,
                ":open": OPEN,
                ":stalled": FINALIZING_PK,
                ":lease": now + lease_seconds,
                ":now": now,
                ":grants": grants,
            },
        )
        closes = [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": self.key(project, run_id, sk),
                    "UpdateExpression": "SET closed = :true, expires_at = if_not_exists(expires_at, :exp)",
                    "ExpressionAttributeValues": dump({":true": True, ":exp": self.expires_at()}),
                }
            }
            for sk in tally_sks()
        ]
        return self.transact([{"Update": claim}, *closes]) is None

    def record_plan(self, project: str, run_id: str, plan: PlanRecord) -> bool:
        """What the claiming finalizer decided: the baseline run, how many parts and how many of them
        it sends, and the version of the whole plan it wrote to S3 (``keys.plan_key``), which every
        part's finalizer and the run's next attempt read."""
        return self.update_run(
            project,
            run_id,
            "SET #plan = :plan ADD rev :one, run_changes :one",
            "#state = :finalizing",
            {":plan": stored("forward.plan", plan), ":finalizing": FINALIZING},
            names={"#plan": PLAN},
        )

    def finish(
        self,
        project: str,
        run_id: str,
        state: str,
        upstream: UpstreamEntry | None = None,
        error: str | None = None,
        outcome: Outcome | None = None,
    ) -> bool:
        """Record how finalizing ended (or, for a run of parts, how one part failed): only a
        finalizer holding the run or one of its parts can, once the run is forwarded no more. The
        shards ``outcome`` carries go first, an item each (``records.carried_items``). A run that ended
        (forwarded, closed empty) owes what follows its end from this same write until ``settle``."""
        kept, carried = carried_items(project, run_id, outcome or Outcome(), self.expires_at())
        self.write_all(carried)
        return self.update_run(
            project,
            run_id,
            f"SET #state = :s, {UPSTREAM} = :up, {ERROR} = :err, outcome = :outcome, {LEASE} = :zero, "
            f"{OWED} = :owed REMOVE open_pk ADD rev :one, run_changes :one",
            "#state IN (:finalizing, :failed)",
            {":s": state, ":up": stored("forward.upstream", upstream), ":err": error, ":outcome": kept, ":zero": 0}
            | {":owed": state in (FORWARDED, CLOSED_EMPTY)}
            | {":finalizing": FINALIZING, ":failed": FORWARD_FAILED},
        )

    def settle(self, project: str, run_id: str) -> bool:
        """The run owes nothing more: every step after its end was done (``FinalizeRun._settle``)."""
        return self.update_run(
            project, run_id, f"REMOVE {OWED} ADD rev :one, run_changes :one", f"{OWED} = :true", {":true": True}
        )

    def fail_held(self, project: str, run_id: str, upstream: UpstreamEntry, error: str) -> bool:
        """Record that a part of a run forwarded in several failed, keeping the run's lease and its
        place among the runs being finalized: no retry takes the run while another part may still
        be at work, and the sweeper brings it back once the last lease has run out."""
        return self.update_run(
            project,
            run_id,
            f"SET #state = :s, {UPSTREAM} = :up, {ERROR} = :err ADD rev :one, run_changes :one",
            "#state IN (:finalizing, :failed)",
            {
                ":s": FORWARD_FAILED,
                ":up": stored("forward.upstream", upstream),
                ":err": error,
                ":finalizing": FINALIZING,
                ":failed": FORWARD_FAILED,
            },
        )

    def touch(self, project: str, run_id: str) -> bool:
        """A change that changes nothing but the revision: the next report gets a new version."""
        return self.update_run(project, run_id, "ADD rev :one, run_changes :one", "attribute_exists(sk)", {})
