"""When do a run's results reach the upstream? One run of 10 shards, one of them 5x slower than the
others (oxc's linter shard), through the local stack in each forward mode: one-upload (the run goes
upstream once, at its end) and parts (each shard goes as its own run part the moment it is counted).

    python bench/parts.py            # shards of 2 to 6 s, the slow one 10 s
    python bench/parts.py --quick    # shards of 1 to 3 s, the slow one 5 s: a smoke for CI

Each shard job sleeps its length (the fast ones a quarter of the first's apart, as jobs of one
matrix end), then pushes its bundle (a grant, then the PUT) as ``codspeed-client push`` does; a watcher notes
when each run part's archive reaches the stand-in
upstream. Printed for each mode: from each shard's PUT to its results upstream (mean, max), and
from the first shard's PUT to the first results upstream. The last line reads ``parts:
first_results_s one-upload=S parts=S; shard_to_upstream_s one-upload=S parts=S`` (the mean over shards;
target: parts' first results under 1 s; one-upload's at the slow shard's end).
"""

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions"), str(ROOT)]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from codspeed_local.stack import LocalStack
from codspeed_rules.runner_json import pushed_part_id
from tests.factories import bundle, upload_request, wait_for

SHARDS, SLOW = 10, 5
PROJECTS = {"one-upload": "acme/when-one-upload", "parts": "acme/when-parts"}


def watch(stack, run_id: str, seen: dict, stop: threading.Event) -> None:
    """Note the moment each run part's archive is at the stand-in: runPartId -> (seconds, its shards)."""
    while not stop.is_set():
        for upload in stack.upstream.uploads(run_id):
            part = json.loads((upload / "metadata.json").read_text())["runPart"]
            if part["runPartId"] not in seen:
                shards = [s["shard"] for s in (part.get("metadata") or {}).get("aggregatedShards") or []]
                seen[part["runPartId"]] = (time.monotonic(), shards)
        time.sleep(0.02)


def one_run(stack, mode: str, length: float) -> dict:
    project, run_id = PROJECTS[mode], f"when-{mode}-{int(time.time() * 1000)}"
    session = requests.Session()
    session.headers["Authorization"] = stack.token
    put_at, seen, stop = {}, {}, threading.Event()

    def job(index: int) -> None:
        time.sleep(length * (SLOW if index == SHARDS else 1 + (index - 1) / 4))
        data = bundle(4000 + index, [f"tests/test_{index}.py::bench_{j}" for j in range(3)])
        grant = session.post(
            f"{stack.api_url}/v1/uploads",
            timeout=30,
            json=upload_request(project, run_id, str(index), data, total=SHARDS),
        ).json()
        requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30).raise_for_status()
        put_at[str(index)] = time.monotonic()

    watcher = threading.Thread(target=watch, args=(stack, run_id, seen, stop), daemon=True)
    watcher.start()
    with ThreadPoolExecutor(SHARDS) as pool:
        list(pool.map(job, range(1, SHARDS + 1)))
    wait_for(lambda: len(seen) >= (SHARDS if mode == "parts" else 1), timeout=120)
    stop.set()
    watcher.join()
    upstream_at = {}
    for part_id, (at, shards) in seen.items():
        for name in shards or [n for n in put_at if pushed_part_id(n, "valgrind") == part_id]:
            upstream_at.setdefault(name, at)
    waits = [upstream_at[n] - put_at[n] for n in put_at]
    return {
        "first": min(upstream_at.values()) - min(put_at.values()),
        "mean": sum(waits) / len(waits),
        "max": max(waits),
        "parts": len(seen),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shards of 1 to 3 s")
    args = parser.parse_args()
    length = 1.0 if args.quick else 2.0
    with LocalStack(
        env={"FORWARD_MODE": "one-upload", "FORWARD_MODES": f"{PROJECTS['parts']}=parts"}, sweep_every=3600
    ) as stack:
        found = {mode: one_run(stack, mode, length) for mode in PROJECTS}
    print(
        f"{SHARDS - 1} shards of {length:.1f} to {length * (1 + (SHARDS - 2) / 4):.1f} s, one of {length * SLOW:.1f} "
        "s, "
        "each pushed when its job ends:"
    )
    for mode, f in found.items():
        print(
            f"  {mode}: {f['parts']} run parts upstream; from a shard's PUT to its results upstream {f['mean']:.2f} s "
            f"mean, {f['max']:.2f} s max; from the first PUT to the first results upstream {f['first']:.2f} s"
        )
    print(
        f"parts: first_results_s one-upload={found['one-upload']['first']:.2f} parts={found['parts']['first']:.2f}; "
        f"shard_to_upstream_s one-upload={found['one-upload']['mean']:.2f} parts={found['parts']['mean']:.2f}"
    )
    missed = found["parts"]["first"] >= 1.0 or found["one-upload"]["first"] < length * (SLOW - 1)  # the slow one's end
    if missed:
        print("  parts MISSED: parts' first results not under 1 s, or one-upload's before the slow shard")
    return 1 if missed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
