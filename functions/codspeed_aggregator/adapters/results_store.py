"""Shard results in the bucket (``results/``): each counted bundle's benchmark names and figures,
one gzipped JSON object beside the bundle, however many benchmarks it holds (a DynamoDB item
holds 400 KB: about 2000 of them); and beside a run's reports, what the latest one summed up of
them (its digest) and what its publisher had read of the run's ledger."""

from __future__ import annotations

import gzip
import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from ..domain.keys import digest_key, known_key, results_key
from ..domain.results import ShardResults, SummaryDigest

if TYPE_CHECKING:  # boto3's type stubs: a dev dependency, not deployed
    from mypy_boto3_s3 import S3Client

LEVEL = 6  # a few hundred KB at most, written once
READERS = 16  # GETs in flight when a report reads many shards' results (a cold process, a shard's page)
CACHED_BENCHMARKS = 1_000_000  # what a process keeps read (a bundle's results never change): ~300 MB at most
UNREADABLE = (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError)  # not gzip, cut short, not the JSON

log = logging.getLogger(__name__)


class ResultsStore:
    def __init__(self, bucket: str, client: S3Client, cached_benchmarks: int = CACHED_BENCHMARKS) -> None:
        self.bucket = bucket
        self.s3 = client
        self._cache: OrderedDict[str, ShardResults | None] = OrderedDict()
        self._cached, self._limit = 0, cached_benchmarks
        self._lock = threading.Lock()

    def write(self, bundle_key: str, results: ShardResults) -> None:
        """Written before the arrival is counted: whoever sees the shard counted finds its results.
        An arrival delivered twice writes the same bytes again."""
        self.s3.put_object(
            Bucket=self.bucket,
            Key=results_key(bundle_key),
            Body=gzip.compress(results.to_json(), LEVEL),
            ContentType="application/json",
            ContentEncoding="gzip",
        )

    def read(self, bundle_key: str) -> ShardResults | None:
        """A bundle's results; None when there are none (expired, or counted before results were
        kept in the bucket). Kept in memory, the least recently read let go first."""
        with self._lock:
            if bundle_key in self._cache:
                self._cache.move_to_end(bundle_key)
                return self._cache[bundle_key]
        found = self._get(bundle_key)
        with self._lock:
            if bundle_key not in self._cache:
                self._cache[bundle_key] = found
                self._cached += len(found.names) if found else 0
            while self._cached > self._limit and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cached -= len(dropped.names) if dropped else 0
        return found

    def read_many(self, bundle_keys: Iterable[str]) -> dict[str, ShardResults | None]:
        """Many bundles' results, read in parallel."""
        keys = list(dict.fromkeys(bundle_keys))
        if len(keys) <= 1:
            return {key: self.read(key) for key in keys}
        with ThreadPoolExecutor(min(READERS, len(keys))) as pool:
            return dict(zip(keys, pool.map(self.read, keys), strict=True))

    def write_digest(self, project: str, run_id: str, digest: SummaryDigest) -> None:
        """The last writer's stands: any digest stands for the bundles it names."""
        self._write(digest_key(project, run_id), digest.to_json())

    def write_known(self, project: str, run_id: str, known: bytes) -> None:
        """What a publisher read of the run's ledger (``Reads.known``): the last writer's stands, as
        any stands for the revisions it names."""
        self._write(known_key(project, run_id), known)

    def read_known(self, project: str, run_id: str) -> bytes | None:
        try:
            return self._read_listed(known_key(project, run_id))
        except UNREADABLE as exc:  # a courtesy that spares reads: without it the run is read whole
            log.warning("what the last publisher read of run %s of %s is unreadable: %r", run_id, project, exc)
            return None

    def copy(self, bundle_key: str, target_bundle_key: str) -> None:
        """A bundle's results, beside a copy of the bundle."""
        self.s3.copy_object(
            Bucket=self.bucket,
            Key=results_key(target_bundle_key),
            CopySource={"Bucket": self.bucket, "Key": results_key(bundle_key)},
        )

    def read_digest(self, project: str, run_id: str) -> SummaryDigest | None:
        try:
            data = self._read_listed(digest_key(project, run_id))
            return None if data is None else SummaryDigest.from_json(data)
        except UNREADABLE as exc:  # a courtesy that spares reads: without it the shards' results are read
            log.warning("the summary digest of run %s of %s is unreadable: %r", run_id, project, exc)
            return None

    def _write(self, key: str, data: bytes) -> None:
        self.s3.put_object(
            Bucket=self.bucket,
            Key=key,
            Body=gzip.compress(data, LEVEL),
            ContentType="application/json",
            ContentEncoding="gzip",
        )

    def _read_listed(self, key: str) -> bytes | None:
        """Listed first: S3 answers the GET of an absent key 403, not 404, to a role that may list
        the bucket only under a prefix (as the functions may, under ``reports/``)."""
        if not self.s3.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1).get("KeyCount"):
            return None
        return self._read(key)

    def _get(self, bundle_key: str) -> ShardResults | None:
        data = self._read(results_key(bundle_key))
        return None if data is None else ShardResults.from_json(data)

    def _read(self, key: str) -> bytes | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise
        with body:
            return gzip.decompress(body.read())
