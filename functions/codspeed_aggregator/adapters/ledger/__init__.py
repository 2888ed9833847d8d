"""The ledger: one DynamoDB table, an adapter per kind of item it holds."""

import time
from dataclasses import dataclass

from .baselines import Baselines
from .codec import TransactionContended
from .comments import Comments
from .parts import Parts
from .reads import Reads, SnapshotContended
from .runs import Runs
from .shards import Shards
from .sources import Sources
from .tokens import Tokens

__all__ = [
    "Baselines",
    "Comments",
    "Ledger",
    "Parts",
    "Reads",
    "Runs",
    "Shards",
    "SnapshotContended",
    "Sources",
    "Tokens",
    "TransactionContended",
]


@dataclass(frozen=True)
class Ledger:
    """Every item kind of one table, on one DynamoDB client."""

    runs: Runs
    shards: Shards
    parts: Parts
    baselines: Baselines
    tokens: Tokens
    reads: Reads
    comments: Comments
    sources: Sources

    @classmethod
    def on(cls, table_name: str, client, retention_seconds: int = 30 * 86400, sleep=time.sleep) -> "Ledger":
        return cls(
            *(
                kind(table_name, client, retention_seconds, sleep)
                for kind in (Runs, Shards, Parts, Baselines, Tokens, Reads, Comments, Sources)
            )
        )

    @property
    def table(self) -> str:
        return self.runs.table

    @property
    def db(self):
        return self.runs.db
