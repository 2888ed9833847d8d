"""Each shard's benchmarks in the bucket (results/): written once at arrival, gzipped, read
back whole, kept in memory as long as a process may (a bundle's results never change)."""

import gzip
import json

from codspeed_aggregator.adapters.aws import client
from codspeed_aggregator.adapters.results_store import ResultsStore
from codspeed_aggregator.domain.keys import results_key
from codspeed_aggregator.domain.results import ShardResults


def _bundle(n: int) -> str:
    return f"bundles/acme%2Fstore/run/{n}/upload-{n}.tar.gz"


def test_results_are_gzipped_json_beside_the_bundle_and_read_back_whole(isolated):
    store, bucket = ResultsStore(isolated.resources.bucket, client("s3")), isolated.resources.bucket
    names = [f"t::{i}" for i in range(20000)]
    store.write(_bundle(1), ShardResults(names, {n: {"unit": "cycles", "value": i} for i, n in enumerate(names)}))
    raw = client("s3").get_object(Bucket=bucket, Key=results_key(_bundle(1)))
    assert results_key(_bundle(1)) == "results/acme%2Fstore/run/1/upload-1.json.gz" and raw["ContentEncoding"] == "gzip"
    assert len(json.loads(gzip.decompress(raw["Body"].read()))["names"]) == 20000
    found = store.read(_bundle(1))
    assert found.names == names and found.results["t::19999"] == {"unit": "cycles", "value": 19999}
    assert store.read(_bundle(2)) is None  # never written


def test_a_process_keeps_what_it_read_within_its_limit_and_lets_go_of_the_least_recent(isolated):
    bucket = isolated.resources.bucket
    store = ResultsStore(bucket, client("s3"), cached_benchmarks=4)
    for n in (1, 2, 3):
        store.write(_bundle(n), ShardResults(["a", "b"], {}))
    assert all(r.names == ["a", "b"] for r in store.read_many(_bundle(n) for n in (1, 2, 3)).values())
    for n in (1, 2, 3):
        client("s3").delete_object(Bucket=bucket, Key=results_key(_bundle(n)))
    kept = [n for n in (1, 2, 3) if store.read(_bundle(n)) is not None]
    assert len(kept) == 2  # 4 benchmarks kept: two shards of two, the least recently read let go
