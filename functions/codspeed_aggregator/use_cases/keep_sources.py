"""Keep the shards a run of a branch carried as sources of the branch's later runs: each is copied
beside the run (its bundle, normalized copy and index, results), so it lives as long as the run's
own bundles, not as long as the run it was measured in. A shard skipped on the branch for longer
than the retention is carried still, as long as the branch runs within it."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from codspeed_rules.index import Index, MadeFrom

from ..adapters.bucket import Bucket
from ..adapters.ledger import Sources
from ..adapters.results_store import ResultsStore
from ..domain.keys import bundle_key, index_key, normalized_key
from ..domain.outcome import CarriedShard
from ..domain.records import KeptSource, NormalizedCopy, ShardRecord

log = logging.getLogger(__name__)


@dataclass
class KeepSources:
    store: Bucket  # S3: the carried shard's bundle, normalized copy and index copied beside the run
    results: ResultsStore  # S3: its results copied beside the copy
    sources: Sources  # DynamoDB: what the run keeps, beside it
    clock: Callable[[], float] = time.time

    def keep(  # noqa: PLR0913 -- the run, what it carried, and what of it a later run needs
        self,
        project: str,
        run_id: str,
        carried: dict[str, ShardRecord],
        outcome: dict[str, CarriedShard],
        results_only: bool = False,
    ) -> int:
        """Copy each shard ``carried`` (from the run ``outcome`` names for it) beside run ``run_id``;
        answers how many were kept. ``results_only``: a run of parts, whose later runs read a carried
        shard's results and never merge its bundle (kept ``PartsBundleRetentionDays``, not as long);
        so is a shard left out of a one-upload run's upload, its bundle expired.
        One that cannot be kept (gone already, over S3's 5 GB copy, or anything else) is said in the
        log and left to age as it was: the run is forwarded, recorded as its branch's baseline and
        tagged final all the same, as no retry would come back to it."""
        kept = 0
        for name, shard in carried.items():
            source = outcome[name]
            try:
                copy = self._copied(project, run_id, shard, results_only or bool(source.left_out))
                self.sources.keep(project, run_id, KeptSource(copy, source.run_id, source.commit, self.clock()))
            except Exception as exc:
                log.warning(
                    "shard %s carried by %s run %s is not kept beside it: %s: %s",
                    name,
                    project,
                    run_id,
                    type(exc).__name__,
                    exc,
                )
                continue
            kept += 1
        return kept

    def _copied(self, project: str, run_id: str, shard: ShardRecord, results_only: bool) -> ShardRecord:
        source = shard.bundle_key
        key = bundle_key(project, run_id, shard.name, shard.upload_id or "carried")
        if results_only:  # its results under the key its bundle would have: what a report reads by
            if shard.results_kept:
                self.results.copy(source, key)
            return replace(shard, key=key, version_id=None, normalized=None)
        version = self.store.copy(source, shard.version_id, key)
        normalized = None
        if shard.normalized:
            own = shard.normalized.key == source  # a bundle verified as normalized is its own copy
            copied = (
                version if own else self.store.copy(shard.normalized.key, shard.normalized.version, normalized_key(key))
            )
            index = Index.from_json(self.store.read_json(index_key(source), shard.normalized.index_version))
            index.bundle = MadeFrom(key, version)  # the splice checks the index against the bundle
            normalized = NormalizedCopy(
                key if own else normalized_key(key), copied, self.store.put_json(index_key(key), index.to_json())
            )
        if shard.results_kept:
            self.results.copy(source, key)
        return replace(shard, key=key, version_id=version, normalized=normalized)
