"""A run's snapshot for its report, at the cost of what changed since: this process's last read of
the run, or in a process new to it what the last report's publisher had read, left beside the run's
reports (one S3 object instead of every shard's item: a cold start of a function, or the finalizer,
the API and the arrivals each reading a big run and its baseline for the first time)."""

from dataclasses import dataclass, field

from ..adapters.ledger import Reads
from ..adapters.results_store import ResultsStore
from ..domain.records import Snapshot
from .shard_summaries import trim_oldest

KNOWN_WORTH = (
    16  # shards a process new to the run reads from DynamoDB itself before it starts from the publisher's read
)
KNOWN_EVERY = 16  # changes of a run its publisher lets pass before it leaves its read again (a few KB, not the whole)
LEFT_RUNS = 32  # runs whose last read left a process remembers


@dataclass
class RunSnapshots:
    reads: Reads  # DynamoDB: the run's record, tallies and the shards changed since
    results: ResultsStore  # S3: what the last publisher read of the run
    # (project, run) -> the revision it left last
    _left: dict[tuple[str, str], int] = field(default_factory=dict, init=False, repr=False)

    def read(self, project: str, run_id: str) -> Snapshot | None:
        """The run as it is now (``Reads.changed_snapshot``), or None when no such run."""
        if not self.reads.knows(project, run_id) and (known := self.results.read_known(project, run_id)):
            self.reads.adopt(project, run_id, known)
        return self.reads.changed_snapshot(project, run_id)

    def published(self, snapshot: Snapshot) -> None:
        """A report of ``snapshot`` was published: what this process read of the run is left beside
        it, when it spares a process new to the run more than a round of reads, and once in
        ``KNOWN_EVERY`` changes (each leaving costs a PUT of about 100 B a shard)."""
        run, key = snapshot.run, (snapshot.run.project, snapshot.run.run_id)
        if len(snapshot.shards) <= KNOWN_WORTH or run.rev < self._left.get(key, -KNOWN_EVERY) + KNOWN_EVERY:
            # a process new to the run reads the changes since the last left: fewer than KNOWN_EVERY of this one's
            return
        if known := self.reads.known(*key):
            self.results.write_known(*key, known)
            self._left.pop(key, None)  # the newest last
            self._left[key] = run.rev
            trim_oldest(self._left, LEFT_RUNS)
