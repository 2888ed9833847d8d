"""Open a run before any shard runs (``POST /v1/runs/open``, ``codspeed-client open``): its
manifest and the shards skipped on purpose, declared once. Its page shows every shard from the
start and its deadline counts from here. The same declaration again (a CI re-run) answers the
run as it is; another one is a conflict."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_wire.api import CloseAnswer, OpenRequest

from ..adapters.ledger import Runs
from ..adapters.queues import FinalizeQueue
from ..domain.errors import Conflict
from ..domain.ledger import ENDED, RunRecord
from ..domain.manifest import Manifest
from ..domain.metadata import check_identity
from ..domain.timestamps import iso
from ..settings import Settings
from .reports import Reports


@dataclass
class OpenRun:
    settings: Settings
    runs: Runs  # DynamoDB: the run item, created here
    queue: FinalizeQueue  # SQS: a run whose every shard is skipped is finalized at once
    reports: Reports
    clock: Callable[[], float] = time.time

    def open(self, request: OpenRequest) -> CloseAnswer:
        project, commit, now = request.project, request.commit, self.clock()
        run_id = self.runs.attempt_of(project, request.run_id, self.settings.max_attempts)
        manifest = Manifest(names=tuple(request.expect)) if request.expect else Manifest(total=request.total, indexed=True)
        owner, repository = project.rsplit("/", 1)
        declared = RunRecord(
            project=project, run_id=run_id, groups={"": manifest}, commit=commit, ref=request.ref,
            base_ref=request.base_ref, base_commit=request.base_commit,
            base_ancestors=tuple(request.base_ancestors) if request.base_commit else (),
            identity={"commitHash": commit, "owner": owner, "repository": repository, "ref": request.ref},
            created_at=iso(now), deadline_at=int(now) + self.settings.run_deadline_seconds,
            skipped=tuple(dict.fromkeys(request.skip)), ci_url=request.ci_url, provider=request.provider,
        )
        run, created = self.runs.open_run(declared)  # as stored, when it was there
        if not created:
            return self._again(run, declared)
        self.reports.publish(project, run_id)
        if run.complete():  # every shard skipped: nothing will come (forwarding carried shards alone is not built yet)
            self.queue.request(project, run_id, "complete")
        skipped = f", {len(run.skipped)} skipped (carried from the baseline run)" if run.skipped else ""
        return CloseAnswer(project=project, run_id=run_id, state=run.state,
                           message=f"opened: {manifest.describe()} expected{skipped}")

    def _again(self, run: RunRecord, declared: RunRecord) -> CloseAnswer:
        """A run opened already: as it is when this declaration is its own, a no-op once it has ended."""
        answer = CloseAnswer(project=run.project, run_id=run.run_id, state=run.state, message="")
        if run.state in ENDED:
            answer.message = f"already {run.state}: open changes nothing (a shard pushed now starts its next attempt)"
            return answer
        check_identity(run.identity, declared.identity)
        mine, theirs = declared.groups[""], run.groups.get("")
        if theirs != mine or set(run.skipped) != set(declared.skipped):
            said = lambda r, m: f"{m.describe()}, skipping {', '.join(r.skipped) or 'none'}"  # noqa: E731
            raise Conflict(f"run {run.run_id} of {run.project} was opened expecting "
                           f"{said(run, theirs) if theirs else run.describe()}; this open declares {said(declared, mine)}")
        answer.message = "already open as declared"
        return answer
