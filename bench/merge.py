"""Merge speed and memory, measured against a floor and a naive merge in the same run.

    python bench/merge.py            # 8 shards x 32 MB of callgrind text, pids colliding
    python bench/merge.py --quick    # a small smoke for CI (well under a minute)

floor: decompress and recompress the same bytes with the codec and level the merge ships,
the compressing on a thread of its own (the merge compresses on two where it has two cores).
merge: the finalizer's (bundles validated at arrival); offline_merge: ``codspeed-aggregator
merge`` of the bundles ``codspeed-client pack`` writes of the same folders (each verified, in
parallel, then spliced); offline_unpacked: the same command on the runner's bundles (on fewer
than 3 cores checked and recompressed in one read of each; on more, each normalized in parallel
into a scratch copy, then spliced); offline_pax and offline_gnu: the same on bundles tarfile
writes with a ``./`` entry and sub-second mtimes (PAX records) and with GNU headers, each
against the floor of its own bundles. Each says which way the command took.
splice: the finalizer's merge of the same bundles normalized (as arrivals leave them: cut at
member boundaries, each segment inflated alone as it was written), copying segments instead of
recompressing; copy: reading those normalized bytes and writing them out with their MD5, the
least any merge can do. arrival_proof_cost: what inflating each segment at arrival adds to the
arrival's normalizing (the inflate a splice no longer does at every forward).
naive: extract every bundle to disk, repack with tarfile "w:gz" at its defaults.
final_job: the last CI job as a user runs it: the ``codspeed-aggregator merge`` process on the
packed bundles, then a PUT of its archive over HTTP to a local stand-in that reads every byte;
against the floor of the same bundles plus the PUT of its output (final_job_rss_growth: the
merge process's peak RSS at 4x the bundles over 1x).
rss_growth: peak RSS of a process merging 4x the input over one merging 1x.
Prints one line per figure; the full run exits 1 when a target is missed.
"""

import argparse
import contextlib
import hashlib
import http.server
import io
import os
import random
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions")]

from codspeed_aggregator.domain import gz
from codspeed_aggregator.domain.bundle import validate_bundle
from codspeed_aggregator.domain.gz import usable_cores
from codspeed_aggregator.domain.merge import DEFAULT_LEVEL, ShardBundle, merge_bundles
from codspeed_aggregator.domain.splice import NormalizedShard, splice
from codspeed_aggregator.offline import SPLICE_CORES, merge_files
from codspeed_local.serving import serve_in_thread, stop_serving
from codspeed_rules.normalize import Normalizer

TARGETS = {
    "merge_vs_floor": ("<=", 1.3),
    "offline_merge_vs_floor": ("<=", 0.5),
    "offline_unpacked_vs_floor": ("<=", 1.3),
    "offline_pax_vs_floor": ("<=", 1.3),
    "offline_gnu_vs_floor": ("<=", 1.3),
    "splice_vs_floor": ("<=", 0.3),
    "splice_vs_copy": ("<=", 2.0),
    "naive_vs_merge": (">=", 10.0),
    "rss_growth": ("<=", 1.15),
    "final_job_vs_floor_upload": ("<=", 1.3),
    "final_job_rss_growth": ("<=", 1.15),
    "arrival_proof_cost": None,
}
PID = 4242


def callgrind_bytes(size: int, seed: int) -> bytes:
    """Callgrind text of about ``size`` bytes: a header, benchmark parts, cost lines."""
    rng = random.Random(seed)
    header = (
        f"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: {PID}\ncmd:  python -m pytest\npart: 1\n\n"
        "desc: Trigger: Client Request: Metadata: pytest-codspeed 3.2.0\n\npositions: line\nevents: Ir\n"
    ).encode()
    names = [f"fn=({i}) module_{i % 97}.function_{i}" for i in range(4000)]
    blocks, total, part = [header], len(header), 2
    while total < size:
        lines = [f"\npart: {part}\ndesc: Trigger: Client Request: tests/test_{seed}.py::test_bench_{part}\n"]
        for _ in range(2000):
            lines.append(
                f"{rng.choice(names)}\n{rng.randint(1, 4000)} {rng.randint(1, 10**6)}\n"
                f"calls={rng.randint(1, 50)} {rng.randint(1, 4000)}\n{rng.randint(1, 4000)} {rng.randint(1, 10**7)}\n"
            )
        block = "".join(lines).encode()
        blocks.append(block)
        total += len(block)
        part += 1
    return b"".join(blocks)[:size]


def write_bundle(path: Path, size: int, seed: int, kind: str = "plain") -> None:
    """A runner-like bundle written with Python's tarfile: ``plain`` (ustar headers, mtime 0),
    ``pax`` (a ``./`` entry and sub-second mtimes: tarfile then writes PAX records, as it does
    for any folder a runner tars) or ``gnu`` (GNU headers, as GNU tar writes them)."""
    content = callgrind_bytes(size, seed)
    form = {"plain": tarfile.DEFAULT_FORMAT, "pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT}[kind]
    with tarfile.open(path, "w:gz", compresslevel=6, format=form) as tar:
        if kind != "plain":
            folder = tarfile.TarInfo("./")
            folder.type, folder.mode, folder.mtime = tarfile.DIRTYPE, 0o755, 1764000000.25
            tar.addfile(folder)
        for name, data in (
            (f"./{PID}.out", content),
            (f"./perf-{PID}.map", b"7f00 10 f\n" * 1000),
            (f"./results/{PID}.json", b'{"ok": true}\n'),
            ("./runner.log", b"log\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kind != "plain":
                info.mtime, info.mode = 1764000000.5 + seed / 7, 0o644
            tar.addfile(info, io.BytesIO(data))


def pack_bundle(source: Path, path: Path) -> None:
    """What ``codspeed-client pack`` writes of the same profile folder: normalized, standard library zlib."""
    with open(source, "rb") as raw, gz.reader(raw) as tar, open(path, "wb") as out:
        normalizer = Normalizer(out, level=6)
        while chunk := tar.read(1 << 20):
            normalizer.feed(chunk)
        normalizer.close()


def shards_from(paths: list[Path]) -> list[ShardBundle]:
    shards = []
    for index, path in enumerate(paths):
        with open(path, "rb") as f:
            pids = tuple(validate_bundle(f).pids)
        shards.append(ShardBundle(f"s{index}", pids, lambda p=path: open(p, "rb")))
    return shards


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def merge_to(shards: list[ShardBundle], out: Path) -> None:
    """The finalizer's merge; the pids come from validation at arrival, as they do from the ledger."""
    with open(out, "wb") as f:
        merge_bundles(shards, f)


def floor_to(paths: list[Path], out: Path) -> None:
    with open(out, "wb") as raw, gz.writer(raw, DEFAULT_LEVEL, threads=1) as sink:
        for path in paths:
            with open(path, "rb") as f, gz.reader(f) as source:
                while chunk := source.read(1 << 20):
                    sink.write(chunk)


def normalize_all(paths: list[Path], work: Path, prove: bool = True) -> tuple[list[NormalizedShard], float]:
    """What arrivals make of each bundle while validating it, and the time it took (per shard and in
    parallel at arrival: not part of a merge's). ``prove``: each segment inflated alone as it is
    written, as arrivals do, so that no splice inflates it again."""
    shards, took = [], 0.0
    for index, path in enumerate(paths):
        copy = work / f"normalized-{index}.tar.gz"
        start = time.perf_counter()
        with open(path, "rb") as source, open(copy, "wb") as sink:
            normalizer = Normalizer(
                sink, compressor=gz.raw_compressor, crc32=gz.crc32, prove=gz.raw_inflater if prove else None
            )
            pids = tuple(validate_bundle(source, tap=normalizer.feed).pids)
            index_doc = normalizer.close()
        took += time.perf_counter() - start
        assert index_doc is not None and index_doc.inflated_alone == prove
        shards.append(NormalizedShard(f"s{index}", pids, index_doc, lambda c=copy: open(c, "rb")))
    return shards, took


def splice_to(shards: list[NormalizedShard], out: Path) -> None:
    with open(out, "wb") as f:
        splice(shards, f)


def copy_to(paths: list[Path], out: Path) -> None:
    md5 = hashlib.md5()
    with open(out, "wb") as sink:
        for path in paths:
            with open(path, "rb") as source:
                while chunk := source.read(1 << 20):
                    md5.update(chunk)
                    sink.write(chunk)


def naive_to(paths: list[Path], out: Path, work: Path) -> None:
    for index, path in enumerate(paths):
        with tarfile.open(path, "r:gz") as tar:
            tar.extractall(work / f"shard-{index}", filter="data")
    with tarfile.open(out, "w:gz") as tar:
        tar.add(work, arcname=".")


class _Sink(http.server.BaseHTTPRequestHandler):
    """The upload's stand-in: reads every byte of a PUT, keeps none."""

    def do_PUT(self) -> None:
        left = int(self.headers["Content-Length"])
        while left:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def upload(path: Path, url: str) -> None:
    with open(path, "rb") as body:
        request = urllib.request.Request(
            url,
            data=body,
            method="PUT",
            headers={"Content-Length": str(path.stat().st_size), "Content-Type": "application/gzip"},
        )
        urllib.request.urlopen(request, timeout=300).read()


def merge_process(paths: list[Path], out: Path) -> int:
    """``codspeed-aggregator merge`` as a CI job runs it, a process of its own; answers its peak RSS (KiB)."""
    # its own peak (VmHWM: ru_maxrss survives exec) or its largest worker's, whichever is larger
    command = [
        sys.executable,
        "-c",
        "import resource, sys; from codspeed_aggregator.cli import main; code = main(sys.argv[1:]); "
        "own = [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
        "print(max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); sys.exit(code)",
        "merge",
        *map(str, paths),
        "-o",
        str(out),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "functions")}
    )
    assert "(spliced)" in done.stdout, done.stdout
    return int(done.stdout.split()[-1])


def final_job(packs: list[Path], work: Path, packed_floor: float) -> tuple[float, float]:
    """(final job / floor plus upload, the merge process's RSS at 4x over 1x)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    serve_in_thread(server)
    url = f"http://127.0.0.1:{server.server_address[1]}/upload"
    try:
        floor_to(packs, work / "floor.tar.gz")
        floor_upload = min(timed(lambda: upload(work / "floor.tar.gz", url)) for _ in range(3))
        job = min(
            timed(lambda: (merge_process(packs, work / "job.tar.gz"), upload(work / "job.tar.gz", url)))
            for _ in range(3)
        )
    finally:
        stop_serving(server)
    rss_1x = merge_process(packs, work / "job.tar.gz")
    rss_4x = merge_process(packs * 4, work / "job.tar.gz")
    print(
        f"final job: merge process and upload {job:.3f} s; floor {packed_floor:.3f} s + upload {floor_upload:.3f} s; "
        f"merge process peak RSS 1x {rss_1x / 1024:.0f} MB, 4x {rss_4x / 1024:.0f} MB"
    )
    return job / (packed_floor + floor_upload), rss_4x / rss_1x


def peak_rss_kib() -> int:
    """This process's peak RSS. Not ru_maxrss: on Linux that survives exec, so a child
    would report its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_rss_of_merge(paths: list[Path], out: Path) -> int:
    """Peak RSS (KiB) of a fresh process that merges ``paths``."""
    result = subprocess.run(
        [sys.executable, __file__, "--child-merge", str(out), *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(result.stdout.strip())


def _child_merge(out: str, *paths: str) -> int:
    """The merge alone, in a process of its own: its peak memory is the merge's."""
    merge_to(shards_from([Path(p) for p in paths]), Path(out))
    print(peak_rss_kib())
    return 0


def _offline_vs_floor(kind: str, count: int, size: int, work: Path, runner_way: str) -> float:
    """The offline merge of the same content in tarfile's ``kind`` format, against its own floor."""
    made = [work / f"{kind}-{i}.tar.gz" for i in range(count)]
    for i, path in enumerate(made):
        write_bundle(path, size, seed=i + 1, kind=kind)
    own_floor = min(timed(lambda: floor_to(made, work / "floor.tar.gz")) for _ in range(3))
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        took = min(timed(lambda: merge_files([str(p) for p in made], str(work / "offline.tar.gz"))) for _ in range(3))
    assert f"({runner_way})" in said.getvalue(), (kind, said.getvalue())  # a harmless PAX or GNU field changes no way
    for path in made:
        path.unlink()
    return took / own_floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run for CI")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--mb", type=float, help="uncompressed MB per shard (default 32, or 2 with --quick)")
    parser.add_argument("--child-merge", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_merge:
        return _child_merge(*args.child_merge)
    size = int((args.mb or (2 if args.quick else 32)) * 1024 * 1024)
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        work = Path(tmp)
        paths = [work / f"shard-{i}.tar.gz" for i in range(args.shards)]
        for i, path in enumerate(paths):
            write_bundle(path, size, seed=i + 1)
        packed = sum(p.stat().st_size for p in paths)
        runner_way = "spliced" if usable_cores() >= SPLICE_CORES else "recompressed"
        print(
            f"workload: {args.shards} shards x {size / 2**20:.0f} MB callgrind text, pid {PID} in every shard, "
            f"{packed / 2**20:.1f} MB of bundles; codec {gz.NAME} level {DEFAULT_LEVEL}; {usable_cores()} cores: "
            f"the runner's bundles are {runner_way} offline"
        )
        floor = min(timed(lambda: floor_to(paths, work / "floor.tar.gz")) for _ in range(3))
        shards = shards_from(paths)
        merge = min(timed(lambda: merge_to(shards, work / "merged.tar.gz")) for _ in range(3))
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            unpacked = min(
                timed(lambda: merge_files([str(p) for p in paths], str(work / "offline.tar.gz"))) for _ in range(3)
            )
        assert f"({runner_way})" in said.getvalue(), said.getvalue()
        kinds = {kind: _offline_vs_floor(kind, args.shards, size, work, runner_way) for kind in ("pax", "gnu")}
        packs = [work / f"packed-{i}.tar.gz" for i in range(len(paths))]
        for path, pack in zip(paths, packs, strict=False):
            pack_bundle(path, pack)
        packed_floor = min(timed(lambda: floor_to(packs, work / "floor.tar.gz")) for _ in range(3))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            offline = min(
                timed(lambda: merge_files([str(p) for p in packs], str(work / "offline.tar.gz"))) for _ in range(3)
            )
        assert "(spliced)" in out.getvalue(), out.getvalue()
        job_ratio, job_rss = final_job(packs, work, packed_floor)
        normalizing = proving = float("inf")
        for _ in range(2):  # alternated, the best of each; both write the same copies (only the indexes differ)
            unproven, took = normalize_all(paths, work, prove=False)  # as indexes made before arrivals proved them
            normalizing = min(normalizing, took)
            normalized, took = normalize_all(paths, work)
            proving = min(proving, took)
        checked = min(timed(lambda: splice_to(unproven, work / "spliced.tar.gz")) for _ in range(3))
        splice_time = min(timed(lambda: splice_to(normalized, work / "spliced.tar.gz")) for _ in range(3))
        copies = [work / f"normalized-{i}.tar.gz" for i in range(len(paths))]
        copy = min(timed(lambda: copy_to(copies, work / "copied.tar.gz")) for _ in range(3))
        naive = timed(lambda: naive_to(paths, work / "naive.tar.gz", work / "naive"))
        shutil.rmtree(work / "naive")
        rss_1x = peak_rss_of_merge(paths, work / "rss1.tar.gz")
        rss_4x = peak_rss_of_merge(paths * 4, work / "rss4.tar.gz")
        merged = (work / "merged.tar.gz").stat().st_size
        spliced = (work / "spliced.tar.gz").stat().st_size
        print(
            f"floor: {floor:.3f} s, merge: {merge:.3f} s ({size * args.shards / merge / 2**20:.0f} MB/s), "
            f"offline merge: {offline:.3f} s (floor of the packed bundles {packed_floor:.3f} s), offline unpacked: "
            f"{unpacked:.3f} s, splice: {splice_time:.3f} s (of copies whose arrival did not inflate "
            f"each segment: {checked:.3f} s), copy: {copy:.3f} s, normalizing at arrival {normalizing:.3f} s, "
            f"with each segment inflated {proving:.3f} s, "
            f"naive: {naive:.3f} s; merged archive {merged / 2**20:.1f} MB, spliced {spliced / 2**20:.1f} MB; peak "
            f"RSS 1x {rss_1x / 1024:.0f} MB, "
            f"4x {rss_4x / 1024:.0f} MB"
        )
    figures = {
        "merge_vs_floor": merge / floor,
        "offline_merge_vs_floor": offline / packed_floor,
        "offline_unpacked_vs_floor": unpacked / floor,
        "offline_pax_vs_floor": kinds["pax"],
        "offline_gnu_vs_floor": kinds["gnu"],
        "splice_vs_floor": splice_time / floor,
        "splice_vs_copy": splice_time / copy,
        "naive_vs_merge": naive / merge,
        "rss_growth": rss_4x / rss_1x,
        "final_job_vs_floor_upload": job_ratio,
        "final_job_rss_growth": job_rss,
        "arrival_proof_cost": proving / normalizing,
    }
    missed = []
    for name, value in figures.items():
        if TARGETS[name] is None:
            print(f"{name}={value:.2f}  (no target)")
            continue
        op, target = TARGETS[name]
        ok = value <= target if op == "<=" else value >= target
        verdict = "" if ok else (", not met at this size: the target is for the full run" if args.quick else ", MISSED")
        print(f"{name}={value:.2f}  (target {op} {target}{verdict})")
        if not ok:
            missed.append(name)
    return 1 if missed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
