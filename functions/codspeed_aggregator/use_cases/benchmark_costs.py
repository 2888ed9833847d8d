"""What each benchmark costs to run (``GET /v1/costs``): its latest recorded cost among the
branch's latest forwarded runs (every shard's, a carried shard's from its source run), in seconds."""

from dataclasses import dataclass
from typing import Any

from codspeed_wire.api import CostsAnswer

from ..adapters.ledger import Baselines, Reads
from ..adapters.results_store import ResultsStore
from ..domain.attempts import base_run_id
from ..domain.baseline import result_sources
from ..domain.costs import run_costs
from ..domain.errors import NotFound
from ..domain.records import Snapshot
from ..settings import Settings

COST_RUNS = 5  # the branch's latest forwarded runs each benchmark's latest cost is looked for in


@dataclass
class BenchmarkCosts:
    settings: Settings
    reads: Reads  # DynamoDB: the run's shards
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run
    results: ResultsStore  # S3: results/, each shard's benchmarks

    def latest(self, project: str, branch: str | None, run_id: str | None = None) -> CostsAnswer:
        """Each benchmark's latest recorded cost on the branch: from its latest forwarded runs, whole
        or with shards missing (``COST_RUNS``, the latest first); for a run's split (``run_id``: every
        attempt of it), from the runs its first split used, pinned then."""
        branch = branch or self.settings.default_branch
        sources = self._sources(project, branch, run_id)
        snapshots = [found for found in (self.reads.snapshot(project, source) for source in sources) if found]
        if not snapshots:
            raise NotFound(f"no run of {project} was forwarded on {branch} yet: there are no recorded costs")
        costs, used = self._latest_costs(snapshots)
        newest = snapshots[0].run
        return CostsAnswer(
            project=project,
            branch=branch,
            run_id=newest.run_id,
            commit=newest.commit,
            runs=used or [newest.run_id],
            benchmarks=costs,
            **({"for_run": base_run_id(run_id)} if run_id else {}),
        )

    def _latest_costs(self, snapshots: list[Snapshot]) -> tuple[dict[str, Any], list[str]]:
        """Each benchmark's latest recorded cost (``snapshots`` the latest first: it wins), and the runs
        they come from."""
        costs: dict[str, Any] = {}
        used = []
        for snapshot in snapshots:
            found = {name: cost for name, cost in self._costs(snapshot).items() if name not in costs}
            if found:
                costs.update(found)
                used.append(snapshot.run.run_id)
        return costs, used

    def _sources(self, project: str, branch: str, run_id: str | None) -> list[str]:
        """The runs whose costs a split uses: those pinned for the run's first split, else the branch's
        latest forwarded (pinned for the run when it names one)."""
        pinned = self.baselines.costs_pinned(project, base_run_id(run_id)) if run_id else None
        if pinned is not None:
            return pinned
        sources = self.baselines.forwarded_runs(project, branch, COST_RUNS)
        if not sources and (latest := self.baselines.latest_baseline(project, branch)):
            sources = [latest]  # forwarded before the index of forwarded runs was kept
        if sources and run_id:
            sources = self.baselines.pin_costs(project, base_run_id(run_id), sources)
        return sources

    def _costs(self, snapshot: Snapshot) -> dict[str, Any]:
        sources = result_sources(snapshot)
        found = self.results.read_many(key for key, _ in sources.values())
        return run_costs(
            {shard: results.results if (results := found.get(key)) else {} for shard, (key, _) in sources.items()}
        )
