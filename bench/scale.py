"""What the deployed stack can take, modelled from throughput measured here and the settings
template.yaml deploys.

    python bench/scale.py            # measure on 4 bundles of 16 MB of callgrind text
    python bench/scale.py --quick    # a small smoke for CI

Measured (one core, this machine): what an arrival does to each bundle (validate it and, in
the same pass, write its normalized copy; or, for a bundle ``codspeed-client`` normalized,
verify it, which writes nothing: printed, the model keeps the runner's slower case) and what a finalizer does
to each part (splice the
normalized copies; the full merge, its fallback, is printed too), in MiB/s of compressed bundle. Lambda gives CPU in
proportion to memory, one vCPU at 1769 MB; both steps are single-threaded, so a function's
rate is the measured one times min(1, memory / 1769), times LAMBDA_CORE (a Lambda vCPU taken
as half a core of this machine, to be safe).

Modelled, for a run of SHARDS x SHARD_MB (default 200 x 200 MB, 40 GB):
- parts: the run's merged uploads, planned by the code that plans them (``plan_uploads``);
- max_part_minutes: one part's splice, plus moving its bytes three times at TRANSFER_MIB_S
  (normalized copies read from S3, the merged part spooled to S3, then sent to the upstream);
- arrivals_batch_seconds: a full arrivals batch of such bundles, each read, validated and
  normalized, and its normalized copy written to S3;
- largest_run_gb: the largest run whose parts are all merged within an hour of its last shard,
  at the finalizer's concurrency (parts in waves), each part within the function's timeout.
The last line reads
``scale: largest_run_gb=X parts=P max_part_minutes=M arrivals_batch_seconds=S``.
"""

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "bench")]

from merge import normalize_all, pack_bundle, shards_from, splice_to, write_bundle
from samtranslator.yaml_helper import yaml_parse

from codspeed_aggregator.domain.bundle import normalizing, validate_bundle
from codspeed_aggregator.domain.merge import merge_bundles
from codspeed_aggregator.domain.upstream_parts import plan_uploads
from codspeed_aggregator.settings import Settings

MIB = 1 << 20
VCPU_MB = 1769  # Lambda: memory at which a function has one full vCPU
TRANSFER_MIB_S = 80  # Lambda <-> S3 or the upstream, one stream: a conservative figure, not measured here
LAMBDA_CORE = 0.5  # a Lambda (arm64) vCPU as a fraction of one of this machine's cores: assumed, on the safe side
WITHIN_MINUTES = 60  # largest_run_gb: every part merged within this long after the last shard
TARGETS = {"largest_run_gb": (">=", 40), "max_part_minutes": ("<=", 10)}


def deployed() -> dict:
    """The figures template.yaml deploys (the functions' memory, timeouts, batch and concurrency)."""
    template = yaml_parse((ROOT / "template.yaml").read_text())
    resources, parameters = template["Resources"], template["Parameters"]
    arrivals = resources["ArrivalsFunction"]["Properties"]
    finalizer = resources["FinalizerFunction"]["Properties"]
    arrivals_source = resources["ArrivalsEventSource"]["Properties"]
    finalize_source = resources["FinalizeEventSource"]["Properties"]
    env = {**finalizer["Environment"]["Variables"], **arrivals["Environment"]["Variables"]}
    code = Settings.from_env()
    return {
        "arrivals_memory": arrivals["MemorySize"],
        "arrivals_timeout": arrivals["Timeout"],
        "arrivals_batch": arrivals_source["BatchSize"],
        "arrivals_reserve": int(env["ARRIVAL_RESERVE_SECONDS"]),
        "arrivals_rate": float(env["ARRIVAL_MIB_PER_SECOND"]),
        "merge_memory": parameters["MergeMemorySize"]["Default"],
        "merge_timeout": finalizer["Timeout"],
        "finalize_concurrency": finalize_source["ScalingConfig"]["MaximumConcurrency"],
        "part_bytes": int(env["MAX_PART_BYTES"]),
        "benchmark_limit": code.max_benchmarks_per_upload,
        "bundle_cap": code.max_bundle_bytes,
    }


def measure(work: Path, bundles: int, mb: float) -> dict[str, float]:
    """MiB/s of compressed bundle, on one core (the process is held to one while it measures: the
    splice's check and the merge's compression run on threads of their own, which a finalizer
    of MergeMemorySize shares a vCPU with): an arrival's pass, a part's splice, a full merge."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        return _measured(work, bundles, mb)
    finally:
        os.sched_setaffinity(0, cores)


def _measured(work: Path, bundles: int, mb: float) -> dict[str, float]:
    paths = [work / f"shard-{i}.tar.gz" for i in range(bundles)]
    for seed, path in enumerate(paths):
        write_bundle(path, int(mb * MIB), seed)
    packed = sum(p.stat().st_size for p in paths) / MIB
    cpu = time.process_time()  # a run of parts: validated only, sent as it came
    for path in paths:
        with open(path, "rb") as f:
            validate_bundle(f)
    validate_rate = packed / (time.process_time() - cpu)
    cpu = time.process_time()  # CPU time, not the wall's: the same on a loaded machine as on a quiet one
    normalized, _ = normalize_all(paths, work)
    arrival_rate = packed / (time.process_time() - cpu)
    started = time.perf_counter()
    splice_to(normalized, work / "spliced.tar.gz")
    splice_rate = packed / (time.perf_counter() - started)
    started = time.perf_counter()
    with open(work / "merged.tar.gz", "wb") as out:
        merge_bundles(shards_from(paths), out)
    merge_rate = packed / (time.perf_counter() - started)
    packs = [work / f"packed-{i}.tar.gz" for i in range(bundles)]
    for path, pack in zip(paths, packs, strict=False):
        pack_bundle(path, pack)
    started = time.perf_counter()
    for pack in packs:
        reading = normalizing(None)
        with open(pack, "rb") as f:
            summary = validate_bundle(f, gunzip=reading.gunzip, tap=reading.tap)
        assert reading.close(summary.listing) is not None
    verify_rate = sum(p.stat().st_size for p in packs) / MIB / (time.perf_counter() - started)
    return {
        "arrival": arrival_rate,
        "validate": validate_rate,
        "verify": verify_rate,
        "splice": splice_rate,
        "merge": merge_rate,
    }


def vcpu(memory_mb: int) -> float:
    return min(1.0, memory_mb / VCPU_MB) * LAMBDA_CORE


def part_minutes(part_mib: float, rate: float, stack: dict) -> float:
    return (part_mib / (rate * vcpu(stack["merge_memory"])) + 3 * part_mib / TRANSFER_MIB_S) / 60


def model(shards: int, shard_mb: float, benchmarks: int, rates: dict[str, float], stack: dict) -> dict:
    arrival_rate, merge_rate = rates["arrival"], rates["splice"]
    sizes = [(f"{i:04d}", benchmarks, int(shard_mb * MIB)) for i in range(shards)]
    limit = stack["benchmark_limit"]
    if benchmarks > limit:  # each shard goes alone, as sent: no merge, its bytes read and sent once
        parts = [[name] for name, _, _ in sizes]
        per_part = shard_mb

        def one_part(mib):
            return 2 * mib / TRANSFER_MIB_S / 60
    else:  # merged parts, cut by both limits: benchmarks and bytes
        parts = plan_uploads(sizes, limit, stack["part_bytes"])
        per_part = min(stack["part_bytes"] / MIB, max(1, limit // max(benchmarks, 1)) * shard_mb)

        def one_part(mib):
            return part_minutes(mib, merge_rate, stack)

    biggest = max(len(part) * shard_mb for part in parts)
    per_bundle = shard_mb / (arrival_rate * vcpu(stack["arrivals_memory"])) + 2 * shard_mb / TRANSFER_MIB_S
    batch = stack["arrivals_batch"] * per_bundle
    full_part = one_part(per_part)
    waves = math.floor(WITHIN_MINUTES / full_part) if full_part * 60 < stack["merge_timeout"] else 0
    largest = waves * stack["finalize_concurrency"] * per_part * MIB / 1e9
    cap = stack["bundle_cap"] / MIB
    lambda_arrival = 1 / (
        1 / (arrival_rate * vcpu(stack["arrivals_memory"])) + 2 / TRANSFER_MIB_S
    )  # MiB/s, bytes moved too: the bundle read, its normalized copy written
    parts_arrival = 1 / (1 / (rates["validate"] * vcpu(stack["arrivals_memory"])) + 1 / TRANSFER_MIB_S)  # read only
    return {
        "parts_arrival_mib_per_second": parts_arrival,
        "parts_largest_bundle_seconds": cap / parts_arrival,
        "parts": len(parts),
        "max_part_minutes": one_part(biggest),
        "part_mib": per_part,
        "max_part_minutes_merged": part_minutes(biggest, rates["merge"], stack),
        "arrivals_batch_seconds": batch,
        "largest_run_gb": largest,
        "largest_bundle_seconds": cap / lambda_arrival,
        "arrival_mib_per_second": lambda_arrival,
    }


# DynamoDB, from the requests the code makes (bench/growth.py counts them) and the item sizes it
# measures; read units: 4 KB strongly consistent, write units: 1 KB, a transaction's items twice.
SHARD_ITEM_KB = 0.3  # a shard item as written (bench/growth.py: ~300 B a shard, all items of a run)
RUN_ITEM_KB = 1.0  # the run item: its groups, inherited counts, plan pointer (grows with groups, not shards)
TALLIES, TALLY_ITEM_KB = 16, 0.1  # the run's tallies: what an arrival's transaction writes beside its shard
NOTE_ITEM_KB = 0.1  # the tally's note of which shard the change changed, in the same transaction
UPLOAD_ITEMS_KB = 2.5  # an upload request and its CodSpeed metadata (the runner's metadata is ~2 KB)
CONFLICT_RATE = 0.1 / TALLIES  # assumed: share of arrival transactions cancelled once by TransactionConflict
# (not measured: 0.1 were all arrivals to meet on one item; they meet on one of 16 tallies)


def ledger(shards: int, parts: int, batch: int) -> dict[str, float]:
    """Read and write units per counted arrival, per report rebuild (a batch), per part, per run."""
    # the run, its tallies, the shard, the upload request: one BatchGetItem, each item rounded up to 4 KB; the
    # tally's revision just before the transaction
    arrival_read = 3 + TALLIES + 1
    arrival_read += math.ceil(
        (RUN_ITEM_KB + TALLIES * TALLY_ITEM_KB) / 4
    )  # the run read again after the count: a Query
    items = math.ceil(SHARD_ITEM_KB) + math.ceil(TALLY_ITEM_KB) + math.ceil(NOTE_ITEM_KB)
    arrival_write = 2 * items * (1 + CONFLICT_RATE)
    # the run's item, tallies and parts (one consistent Query), then the batch's notes and shard items
    # (BatchGetItems, each item rounded up to 4 KB); a process's first rebuild reads the run whole
    rebuild_read = math.ceil((RUN_ITEM_KB + TALLIES * TALLY_ITEM_KB) / 4) + 2 * min(batch, shards)
    # the run and its part items, the first shard's metadata, and each of its own shards' metadata
    part_read = math.ceil(RUN_ITEM_KB / 4) + (1 + math.ceil(shards / parts)) * math.ceil(UPLOAD_ITEMS_KB / 4)
    part_write = 3  # its claim, the upstream's answer before the PUT, the forwarded record
    grants = shards * (1 + math.ceil(UPLOAD_ITEMS_KB))  # the run item's touch, the upload request and metadata
    run_reads = shards * arrival_read + math.ceil(shards / batch) * rebuild_read + parts * part_read
    run_writes = grants + shards * arrival_write + parts * part_write
    return {
        "arrival_read": arrival_read,
        "arrival_write": arrival_write,
        "rebuild_read": rebuild_read,
        "part_read": part_read,
        "part_write": part_write,
        "run_reads": run_reads,
        "run_writes": run_writes,
    }


def sensitivity(shards: int, shard_mb: float, benchmarks: int, rates: dict[str, float], stack: dict) -> str:
    """largest_run_gb and max_part_minutes at the corners of what is not measured here."""
    global LAMBDA_CORE, TRANSFER_MIB_S
    saved, cells = (LAMBDA_CORE, TRANSFER_MIB_S), []
    try:
        for core in (0.5, 1.0):
            for transfer in (40, 160):
                LAMBDA_CORE, TRANSFER_MIB_S = core, transfer
                f = model(shards, shard_mb, benchmarks, rates, stack)
                cells.append(
                    f"vcpu={core} transfer={transfer}: largest_run_gb={f['largest_run_gb']:.0f} "
                    f"max_part_minutes={f['max_part_minutes']:.1f}"
                )
    finally:
        LAMBDA_CORE, TRANSFER_MIB_S = saved
    return "; ".join(cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs: a smoke run for CI")
    parser.add_argument("--shards", type=int, default=200)
    parser.add_argument("--shard-mb", type=float, default=200)
    parser.add_argument("--benchmarks", type=int, default=25, help="benchmarks per shard")
    args = parser.parse_args()
    stack = deployed()
    with tempfile.TemporaryDirectory() as folder:
        rates = measure(Path(folder), 2 if args.quick else 4, 2 if args.quick else 16)
    figures = model(args.shards, args.shard_mb, args.benchmarks, rates, stack)
    units = ledger(args.shards, figures["parts"], stack["arrivals_batch"])
    print(
        f"measured: arrival in parts (validate) {rates['validate']:.1f} MiB/s, "
        f"in one-upload (validate + normalize) {rates['arrival']:.1f} MiB/s, arrival of a packed bundle "
        f"(validate + verify) {rates['verify']:.1f} MiB/s, splice {rates['splice']:.1f} MiB/s, "
        f"full merge {rates['merge']:.1f} MiB/s of compressed bundle, one core"
    )
    print(
        f"deployed: arrivals {stack['arrivals_memory']} MB / {stack['arrivals_timeout']} s / batch "
        f"{stack['arrivals_batch']}, "
        f"finalizer {stack['merge_memory']} MB / {stack['merge_timeout']} s x {stack['finalize_concurrency']}, "
        f"parts of {stack['part_bytes'] / MIB:.0f} MiB; assumed: a Lambda vCPU = {LAMBDA_CORE} core here, "
        f"transfers at {TRANSFER_MIB_S} MiB/s"
    )
    print(
        f"largest bundle ({stack['bundle_cap'] / MIB:.0f} MiB) takes its arrival in parts "
        f"{figures['parts_largest_bundle_seconds']:.0f} s ({figures['parts_arrival_mib_per_second']:.1f} MiB/s "
        f"modelled), in one-upload {figures['largest_bundle_seconds']:.0f} s "
        f"({figures['arrival_mib_per_second']:.1f} MiB/s modelled; the reserve counts {stack['arrivals_rate']:g} MiB/s "
        f"after {stack['arrivals_reserve']} s, so "
        f"{stack['arrivals_reserve'] + stack['bundle_cap'] / MIB / stack['arrivals_rate']:.0f} s); "
        f"a part merged without its normalized copies (the fallback) takes {figures['max_part_minutes_merged']:.1f} min"
    )
    print(
        f"parts: {figures['parts']} of at most {figures['part_mib']:.0f} MiB (both limits: {stack['benchmark_limit']} "
        f"benchmarks, {stack['part_bytes'] / MIB:.0f} MiB; {args.benchmarks} benchmarks a shard"
        + (", each shard over the limit sent alone" if args.benchmarks > stack["benchmark_limit"] else "")
        + ")"
    )
    print(
        f"dynamodb: per arrival {units['arrival_read']} read units, {units['arrival_write']:.1f} write units "
        f"(assumed: {CONFLICT_RATE:.1%} of transactions retried once); per report rebuild "
        f"{units['rebuild_read']} read units (assumed: {SHARD_ITEM_KB} KB a shard item, measured by bench/growth.py); "
        f"per part {units['part_read']} read, {units['part_write']} write units; per run "
        f"{units['run_reads']:.0f} read and {units['run_writes']:.0f} write units"
    )
    print(f"sensitivity: {sensitivity(args.shards, args.shard_mb, args.benchmarks, rates, stack)}")
    # the reserve's rate no faster than the one measured (in CPU time: the verdict does not move with the
    # machine's load), and the largest bundle within a fresh invocation, its floor kept
    checks = {
        **TARGETS,
        "arrivals_batch_seconds": ("<=", stack["arrivals_timeout"] / 2),
        "largest_bundle_seconds": ("<=", stack["arrivals_timeout"] - stack["arrivals_reserve"]),
        "arrival_mib_per_second": (">=", stack["arrivals_rate"]),
    }
    missed = []
    for name, (op, target) in checks.items():
        value = figures[name]
        ok = value >= target if op == ">=" else value <= target
        print(f"{name}: {value:.1f} (target {op} {target:g}){'' if ok else ', MISSED'}")
        missed += [] if ok else [name]
    print(
        f"scale: largest_run_gb={figures['largest_run_gb']:.0f} parts={figures['parts']} "
        f"max_part_minutes={figures['max_part_minutes']:.1f} "
        f"arrivals_batch_seconds={figures['arrivals_batch_seconds']:.0f}"
    )
    return 1 if missed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
