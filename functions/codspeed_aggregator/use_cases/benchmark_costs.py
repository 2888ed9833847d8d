"""What each benchmark costs to run (``GET /v1/costs``): the branch's latest forwarded run's
recorded results, every shard's (a carried shard's from its source run), in seconds."""

from dataclasses import dataclass

from codspeed_wire.api import CostsAnswer

from ..adapters.ledger import Baselines, Reads
from ..adapters.results_store import ResultsStore
from ..domain.baseline import result_sources
from ..domain.costs import run_costs
from ..domain.errors import NotFound
from ..domain.ledger import base_run_id
from ..settings import Settings


@dataclass
class BenchmarkCosts:
    settings: Settings
    reads: Reads  # DynamoDB: the run's shards
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run
    results: ResultsStore  # S3: results/, each shard's benchmarks

    def latest(self, project: str, branch: str | None, run_id: str | None = None) -> CostsAnswer:
        """The costs of the branch's latest forwarded run; for a run's split (``run_id``: every
        attempt of it), those of the run its first split used, pinned then."""
        branch = branch or self.settings.default_branch
        source = self.baselines.costs_pinned(project, base_run_id(run_id)) if run_id else None
        if source is None:
            source = self.baselines.latest_baseline(project, branch)
            if source is not None and run_id:
                source = self.baselines.pin_costs(project, base_run_id(run_id), source)
        snapshot = self.reads.snapshot(project, source) if source else None
        if snapshot is None:
            raise NotFound(f"no run of {project} was forwarded on {branch} yet: there are no recorded costs")
        sources = result_sources(snapshot)
        found = self.results.read_many(key for key, _ in sources.values())
        by_shard = {shard: found[key].results if found.get(key) else {} for shard, (key, _) in sources.items()}
        return CostsAnswer(project=project, branch=branch, run_id=source, commit=snapshot.run.commit,
                           benchmarks=run_costs(by_shard), **({"for_run": base_run_id(run_id)} if run_id else {}))
