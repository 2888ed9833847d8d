"""The largest record of a run at the caps' product, written through the ledger's own adapters to
moto (which refuses an item over 400 KB, as DynamoDB does) and measured by DynamoDB's rules of an
item's size (``billing.item_size``): a run of 100 job groups of 1000 shards, every name, ref and
link at its longest, a part a shard each answered under an upstream run of its own, 3000 carried
shards, the benchmarks it lost with names of 4 KB. ``tests/integration/test_record_sizes.py``
writes the same run (``write_largest``) and checks what it reads back.

    python bench/record_sizes.py           # the largest items, and exit 1 past 400 KB
    python bench/record_sizes.py --quick   # the same (it takes seconds): make bench-smoke's
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "local"), str(ROOT / "bench")]

from billing import item_size

from codspeed_aggregator.domain.baseline import MAX_LISTED, first_listed
from codspeed_aggregator.domain.forward_plan import UpstreamRuns
from codspeed_aggregator.domain.identity import RunIdentity
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_aggregator.domain.outcome import CarriedShard, ChosenBaseline, Outcome
from codspeed_aggregator.domain.plan_record import PlanRecord
from codspeed_aggregator.domain.records import FORWARDED, MAX_GROUPS, MAX_VARIANTS, RunRecord, variant_key
from codspeed_aggregator.use_cases.finalize_run import RUN_HASHES
from codspeed_wire.api import MAX_SHARDS
from codspeed_wire.report import UpstreamEntry

DYNAMODB_ITEM_LIMIT = 400 * 1024


def longest(prefix: str, n: int, width: int) -> str:
    """A name at ``width`` characters, made distinct by ``n``."""
    return f"{prefix}{n:05d}".ljust(width, "x")


def largest_run(project: str, run_id: str) -> RunRecord:
    """A run opened at every limit: 1000 shards of 128-character names skipped, 99 job groups of 1000."""
    names = tuple(longest("s", i, 128) for i in range(MAX_SHARDS))  # a pushed shard's name: 128 characters
    jobs = {longest("job", i, 89) + "!0123456789": Manifest(total=MAX_SHARDS) for i in range(MAX_GROUPS - 1)}
    return RunRecord(
        project=project,
        run_id=run_id,
        groups={"": Manifest(names=names), **jobs},
        commit="a" * 64,
        head_commit="b" * 64,
        ref="refs/heads/" + "r" * 989,
        base_ref="refs/heads/" + "m" * 989,
        base_commit="c" * 64,
        base_ancestors=tuple(f"{i:064x}" for i in range(50)),
        identity=RunIdentity("a" * 64, "o" * 100, "p" * 100, "r" * 1000),
        created_at="2026-12-05T00:00:00.000000Z",
        ci_url="https://ci.example/" + "u" * 2020,
        skipped=names,
        variants=tuple(
            variant_key(group, f"{'e' * 32}/{i}") for group in jobs for i in range(MAX_VARIANTS // len(jobs) + 1)
        )[:MAX_VARIANTS],
    )


def write_largest(ledger, project: str, run_id: str) -> dict:
    """Open, close, claim, plan and finish the largest run through ``ledger``; what its finish wrote."""
    run = largest_run(project, run_id)
    ledger.runs.open_run(run)
    assert not ledger.runs.add_group(project, run_id, "one-too-many", Manifest(total=1))
    assert not ledger.runs.add_variant(project, run_id, variant_key("", "walltime/1"))
    assert ledger.closes.request_close(project, run_id, [])
    assert ledger.runs.claim_finalize(project, run_id, 1, 60, grants=0)
    assert ledger.runs.record_plan(project, run_id, PlanRecord(baseline=run_id, parts=MAX_SHARDS, sends=MAX_SHARDS))
    carried = {  # each skipped name under three executors: what a skip stands for
        f"{name}~{executor}": CarriedShard(
            run_id=longest("main-", i, 133),
            commit="d" * 64,
            branch="m" * 989,
            benchmarks=1_000_000,
            size=5 * 1024**3,
            group="",
            key=f"bundles/{project}/{'x' * 400}/{name}",
        )
        for i, name in enumerate(run.skipped)
        for executor in ("valgrind", "walltime", "memory")
    }
    gone = [f"tests/test_{i}.py::" + "b" * 4000 for i in range(MAX_LISTED)]  # benchmark names have no bound
    outcome = Outcome(
        baseline=ChosenBaseline(run_id, "d" * 64, "m" * 989, "w" * 2000),
        carried=carried,
        missing_benchmarks=tuple(first_listed(gone)),
        missing_benchmarks_total=len(gone),
    )
    # a part a shard (the parts mode), each answered under an upstream run of its own: the caps' product,
    # in ids of 40 two-byte characters (the case seen: their comma-joined list passed 400 KB at ~1,640)
    runs = UpstreamRuns([f"{'é' * 34}{i:06d}" for i in range(MAX_GROUPS * MAX_SHARDS)])
    hashes = ["f" * 64] * RUN_HASHES  # a tokenless run's merged uploads' Run Hashes, as many as its item keeps
    upstream = UpstreamEntry(
        **runs.said(), status="success", at="2026-12-05T00:00:00Z", message="m" * 200, run_hashes=hashes
    )
    assert ledger.runs.finish(project, run_id, FORWARDED, upstream=upstream, outcome=outcome)
    return {"carried": carried, "gone": gone, "runs": runs}


def partition(ledger, project: str, run_id: str) -> dict[str, dict]:
    """Every item of the run's partition, by sort key, as DynamoDB holds them."""
    query = {
        "TableName": ledger.table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"RUN#{project}#{run_id}"}},
    }
    found = ledger.db.query(**query)
    items = found["Items"]
    while "LastEvaluatedKey" in found:
        found = ledger.db.query(**query, ExclusiveStartKey=found["LastEvaluatedKey"])
        items += found["Items"]
    return {i["sk"]["S"]: i for i in items}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the same run: it takes seconds")
    parser.parse_args()
    import boto3
    from moto import mock_aws

    from codspeed_aggregator.adapters.ledger import Ledger
    from codspeed_local.resources import create

    with mock_aws():
        clients = [boto3.client(s, region_name="us-east-1") for s in ("s3", "sqs", "dynamodb")]
        resources = create(*clients, prefix="sizes")
        ledger = Ledger.on(resources.table, clients[2])
        write_largest(ledger, "g" * 100 + "/" + "r" * 100, "run-" + "9" * 120)
        sizes = {
            sk: item_size(item)
            for sk, item in partition(ledger, "g" * 100 + "/" + "r" * 100, "run-" + "9" * 120).items()
        }
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    for sk, size in largest:
        print(f"  {sk[:40]:40} {size:>8,} bytes")
    print(f"record_sizes: items={len(sizes)} largest_bytes={largest[0][1]} (limit {DYNAMODB_ITEM_LIMIT})")
    return 0 if largest[0][1] < DYNAMODB_ITEM_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
