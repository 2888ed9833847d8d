"""Open a run before any shard runs (``POST /v1/runs/open``, ``codspeed-client open``): its
manifest (the shards the client pushes, the jobs of a CodSpeed workflow) and the shards skipped
on purpose, declared once. Its page shows every shard from the start and its deadline counts from
here. The same declaration again (a CI re-run) answers the run as it is; another one is a
conflict. A run whose every shard is skipped is forwarded at once, its shards carried, under the
metadata the opening job stated."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from codspeed_rules.names import gitlab_runner_run_id
from codspeed_wire.api import CloseAnswer, OpenRequest

from ..adapters.ledger import Baselines, Runs, Shards
from ..adapters.queues import FinalizeQueue
from ..domain.baseline import branch_of
from ..domain.drop_in import group_of
from ..domain.errors import Conflict, Unprocessable
from ..domain.forwarding import RunForward
from ..domain.identity import RunIdentity, check_identity
from ..domain.manifest import Manifest
from ..domain.records import ENDED, OPENED, RunRecord
from ..domain.timestamps import iso
from ..settings import Settings
from .reports import Reports


@dataclass
class OpenRun:
    settings: Settings
    runs: Runs  # DynamoDB: the run item, created here
    shards: Shards  # DynamoDB: the metadata the opening job stated, beside the run
    baselines: Baselines  # DynamoDB: whether a run of every shard skipped has a run to carry them from
    queue: FinalizeQueue  # SQS: a run whose every shard is skipped is finalized at once
    reports: Reports
    clock: Callable[[], float] = time.time

    def open(self, request: OpenRequest, fork: bool = False) -> CloseAnswer:
        """``fork``: opened without a token by a fork's pull request (``fork_pull_requests`` checked it)."""
        project, commit, now = request.project, request.commit, self.clock()
        run_id = self.runs.attempt_of(project, self._run_id(request))
        owner, repository = project.rsplit("/", 1)
        declared = RunRecord(
            project=project,
            run_id=run_id,
            groups=_groups(request),
            commit=commit,
            ref=request.ref,
            base_ref=request.base_ref,
            head_commit=request.head_commit,
            base_commit=request.base_commit,
            base_ancestors=tuple(request.base_ancestors) if request.base_commit else (),
            identity=RunIdentity(commit, owner, repository, request.ref),
            created_at=iso(now),
            deadline_at=int(now) + self.settings.run_deadline_seconds,
            skipped=tuple(dict.fromkeys(request.skip)),
            ci_url=request.ci_url,
            provider=request.provider,
            declared=True,
            forward=RunForward(sends_parts=self.settings.sends_parts(project)),
            fork=fork,
        )
        stated = RunIdentity.of(request.metadata.identity()) if request.metadata is not None else None
        if stated is not None and declared.identity and (found := declared.identity.first_difference(stated)):
            field, said, opened = found
            raise Unprocessable(
                f"metadata field {field} is {said!r} but the open states {opened!r}: "
                "the metadata is what the run's shards send"
            )
        run, created = self.runs.open_run(declared)  # as stored, when it was there
        if not created:
            return self._again(run, declared)
        if request.metadata is not None:
            self.shards.keep_metadata(project, run_id, OPENED, request.metadata.wire())
        self.reports.publish(project, run_id)
        message = f"opened: {run.describe()} expected"
        if run.complete():  # every shard skipped: nothing will come
            self.queue.request(project, run_id, "complete")
            message += f", all {len(run.skipped)} skipped: {self._all_skipped(run, request)}"
        elif run.skipped:
            message += f", {len(run.skipped)} skipped (carried from the baseline run)"
        return CloseAnswer(project=project, run_id=run_id, state=run.state, message=message)

    @staticmethod
    def _run_id(request: OpenRequest) -> str:
        """The run the declared shards and jobs count in: on GitLab a CodSpeed runner's jobs share no
        run id, their run is their commit and ref (``domain.drop_in``), and so is the one declared."""
        if request.jobs and request.provider == "GITLAB":
            if request.total is not None or request.expect is not None:
                raise Unprocessable(
                    "on GitLab, a CodSpeed runner's jobs count in a run of their own (their commit "
                    "and ref): open the jobs apart from the shards codspeed-client pushes"
                )
            return gitlab_runner_run_id(request.commit, request.ref)
        return request.run_id

    def _all_skipped(self, run: RunRecord, request: OpenRequest) -> str:
        """What becomes of a run whose every shard is skipped, in the words of its open's answer."""
        branch = branch_of(run.base_ref) or self.settings.default_branch
        if self.baselines.latest_baseline(run.project, branch) is None:
            return f"no run of {branch} was forwarded to carry them from, so nothing is forwarded (closed_empty)"
        if request.metadata is None:
            return "the open stated no metadata to forward them under, so nothing is forwarded (closed_empty)"
        return f"forwarded now, each carried from the latest run of {branch} that has it"

    def _again(self, run: RunRecord, declared: RunRecord) -> CloseAnswer:
        """A run opened already: as it is when this declaration is its own, a no-op once it has ended."""
        answer = CloseAnswer(project=run.project, run_id=run.run_id, state=run.state, message="")
        if run.state in ENDED:
            answer.message = f"already {run.state}: open changes nothing (a shard pushed now starts its next attempt)"
            return answer
        check_identity(run.identity, declared.identity)
        if run.groups != declared.groups or set(run.skipped) != set(declared.skipped):

            def said(r: RunRecord) -> str:
                return f"{r.describe()}, skipping {', '.join(r.skipped) or 'none'}"

            raise Conflict(
                f"run {run.run_id} of {run.project} was opened expecting {said(run)}; this open declares "
                f"{said(declared)}"
            )
        answer.message = "already open as declared"
        return answer


def _groups(request: OpenRequest) -> dict[str, Manifest]:
    """The run's job groups: the shards the client pushes (the group ""), and each CodSpeed job as
    its runner's uploads name it (``domain.drop_in``: a matrix counts its jobs, a plain job is one)."""
    groups = {group_of(job): Manifest(total=count) for job, count in (request.jobs or {}).items()}
    if request.expect:
        groups[""] = Manifest(names=tuple(request.expect))
    elif request.total is not None:
        groups[""] = Manifest(total=request.total, indexed=True)
    return groups
