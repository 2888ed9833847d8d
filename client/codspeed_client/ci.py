"""What the CI (or git) says about this job: project, run id, commit, refs."""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing costs every command 3 ms at start-up: type checkers only read it
if TYPE_CHECKING:
    from typing import Any


class CiContext:
    """What the CI (or git) says about this job; None where it cannot tell. A plain class: the
    dataclasses module alone would add about 7 ms to every push's start-up."""

    def __init__(  # noqa: PLR0913 -- a record, each field a keyword: the dataclasses module would cost every push 10 ms
        self,
        provider: str = "LOCAL",
        project: str | None = None,
        run_id: str | None = None,
        commit: str | None = None,
        ref: str | None = None,
        head_ref: str | None = None,
        base_ref: str | None = None,
        event: str | None = None,
        job: str | None = None,
        sender: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        repository_root: str | None = None,
        run_attempt: str | None = None,
        shard: str | None = None,
        ci_url: str | None = None,
        base_commit: str | None = None,
        fork: str | None = None,
        head_commit: str | None = None,
        local_data: dict[str, Any] | None = None,
        repository_provider: str | None = None,
        part_metadata: dict[str, Any] | None = None,
        runner: str | None = None,
    ) -> None:
        self.provider, self.project, self.run_id, self.commit = provider, project, run_id, commit
        self.ref, self.head_ref, self.base_ref, self.event, self.job = ref, head_ref, base_ref, event, job
        self.sender = sender
        self.extra = extra or {}  # ghData / glData, as CodSpeed's metadata wants them
        self.repository_root = repository_root
        self.run_attempt = run_attempt  # a CI re-run of the same run (GitHub's GITHUB_RUN_ATTEMPT)
        self.shard = shard  # I/N when the CI splits the job itself (GitLab parallel, Buildkite parallelism)
        self.ci_url = ci_url  # the CI run's page, as the CI names it
        self.base_commit = base_commit  # the base branch's commit a pull request's code is built on
        self.fork = fork  # the repository a pull request comes from, when not the project's own (no secrets there)
        # a pull request's head, where the commit sent is a merge commit: what a reviewer is shown (its status)
        self.head_commit = head_commit
        self.local_data = local_data  # the runner's localData, for a run outside CI
        # what the runner's runPart.metadata says of the job: a GitHub matrix's keys, a CircleCI node's place
        self.part_metadata = part_metadata or {}
        self.runner = runner  # the runner the job runs on (GitHub's RUNNER_NAME): how its CI's jobs list names it
        # where the repository lives (GITHUB, GITLAB): the CI's own, or a local clone's remote's host
        self.repository_provider = repository_provider or ("GITLAB" if provider == "GITLAB_CI" else "GITHUB")


def next_run_index(ctx: CiContext, run_id: str) -> int:
    """The runner's count of a CI job's uploads (``run-index``): 0, 1, … per run and job, on the job's
    machine (a re-run of the job is a fresh one: 0 again, as the runner's). Kept in its temporary space,
    not in the checkout: a push leaves the user's files as they were. A local run counts nothing."""
    if ctx.provider == "LOCAL":
        return 0
    import hashlib
    import tempfile

    key = hashlib.sha256(f"{ctx.project}\n{run_id}\n{ctx.job}".encode()).hexdigest()
    state = os.path.join(
        os.environ.get("RUNNER_TEMP") or tempfile.gettempdir(), "codspeed-client-run-state", f"{key}.json"
    )
    try:
        with open(state) as f:
            index = int(json.load(f).get("run_index", 0))
    except (OSError, ValueError, AttributeError, TypeError):
        index = 0
    try:
        os.makedirs(os.path.dirname(state), exist_ok=True)
        with open(state, "w") as f:
            json.dump({"run_index": index + 1}, f)
    except OSError:  # a read-only checkout: the runner goes on with 0 too
        pass
    return index
