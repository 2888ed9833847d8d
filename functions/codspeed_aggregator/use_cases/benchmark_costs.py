"""What each benchmark costs to run (``GET /v1/costs``): the branch's latest forwarded run's
recorded results, every shard's (a carried shard's from its source run), in seconds."""

from dataclasses import dataclass

from codspeed_wire.api import CostsAnswer

from ..adapters.ledger import Baselines, Reads
from ..adapters.results_store import ResultsStore
from ..domain.baseline import result_sources
from ..domain.costs import run_costs
from ..domain.errors import NotFound
from ..settings import Settings


@dataclass
class BenchmarkCosts:
    settings: Settings
    reads: Reads  # DynamoDB: the run's shards
    baselines: Baselines  # DynamoDB: the branch's latest forwarded run
    results: ResultsStore  # S3: results/, each shard's benchmarks

    def latest(self, project: str, branch: str | None) -> CostsAnswer:
        branch = branch or self.settings.default_branch
        run_id = self.baselines.latest_baseline(project, branch)
        snapshot = self.reads.snapshot(project, run_id) if run_id else None
        if snapshot is None:
            raise NotFound(f"no run of {project} was forwarded on {branch} yet: there are no recorded costs")
        sources = result_sources(snapshot)
        found = self.results.read_many(key for key, _ in sources.values())
        by_shard = {shard: found[key].results if found.get(key) else {} for shard, (key, _) in sources.items()}
        return CostsAnswer(project=project, branch=branch, run_id=run_id, commit=snapshot.run.commit,
                           benchmarks=run_costs(by_shard))
