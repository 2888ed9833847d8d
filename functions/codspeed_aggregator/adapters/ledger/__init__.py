"""The ledger: one DynamoDB table, an adapter per kind of item it holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .baselines import Baselines
from .ci_jobs import CiJobs
from .closes import Closes
from .codec import TransactionContended
from .comments import Comments
from .parts import Parts
from .reads import Reads, SnapshotContended
from .runs import Runs
from .shards import Shards
from .sources import Sources
from .tokens import Tokens

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = [
    "Baselines",
    "CiJobs",
    "Closes",
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
    closes: Closes
    shards: Shards
    ci_jobs: CiJobs
    parts: Parts
    baselines: Baselines
    tokens: Tokens
    reads: Reads
    comments: Comments
    sources: Sources

    @classmethod
    def on(
        cls,
        table_name: str,
        client: DynamoDBClient,
        retention_seconds: int = 30 * 86400,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Ledger:
        made = (table_name, client, retention_seconds, sleep)
        return cls(
            runs=Runs(*made),
            closes=Closes(*made),
            shards=Shards(*made),
            ci_jobs=CiJobs(*made),
            parts=Parts(*made),
            baselines=Baselines(*made),
            tokens=Tokens(*made),
            reads=Reads(*made),
            comments=Comments(*made),
            sources=Sources(*made),
        )

    @property
    def table(self) -> str:
        return self.runs.table

    @property
    def db(self) -> DynamoDBClient:
        return self.runs.db
