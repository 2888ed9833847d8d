"""Per-benchmark results: what an arrival keeps of a shard's profiles, and how a run's
benchmarks compare with its baseline run's.

A valgrind benchmark's figure is its estimated cycles, weighing cache misses as valgrind's
documentation suggests (an L1 miss costs about 10 cycles, a last-level miss up to 200):
``Ir + 10 x (I1mr + D1mr + D1mw) + 100 x (ILmr + DLmr + DLmw)``. A walltime benchmark's is its
mean time per round."""

from codspeed_wire.report import BenchmarkEntry

L1_WEIGHT, LL_WEIGHT = 10, 100
FLAGS = ("regression", "improvement")


def measured(raw: dict[str, dict]) -> dict[str, dict]:
    """A bundle's results (``BundleSummary.results``) in the form the ledger keeps."""
    kept = {}
    for name, r in raw.items():
        if "Ir" in r:
            l1 = r.get("I1mr", 0) + r.get("D1mr", 0) + r.get("D1mw", 0)
            ll = r.get("ILmr", 0) + r.get("DLmr", 0) + r.get("DLmw", 0)
            kept[name] = {"unit": "cycles", "value": r["Ir"] + L1_WEIGHT * l1 + LL_WEIGHT * ll,
                          "instructions": r["Ir"], "l1_misses": l1, "ll_misses": ll}
        elif "mean_ns" in r:
            kept[name] = {"unit": "ns", "value": r["mean_ns"], "stdev_ns": r.get("stdev_ns")}
    return kept


def compare(shards: dict[str, dict[str, dict]], still_open: bool, carried: dict[str, str],
            baseline: list[BenchmarkEntry], source: str | None, threshold: float) -> list[BenchmarkEntry]:
    """The run's benchmarks: ``shards`` maps each arrived shard to its results, ``carried`` the
    shards whose results come from the baseline (to a description of where). A baseline
    benchmark found nowhere is running while the run is open and its shard is not in, else
    missing. Regressions first, the largest first; improvements last."""
    before = {b.name: b for b in baseline if b.value is not None}
    entries, seen = [], set()
    for shard, results in shards.items():
        for name, result in results.items():
            seen.add(name)
            entry = BenchmarkEntry(name=name, shard=shard, state="measured", **result)
            base = before.get(name)
            if base is not None and base.unit == entry.unit and base.value:
                entry.baseline = base.value
                entry.change = (entry.value - base.value) / base.value
                if abs(entry.change) > threshold:
                    entry.flag = FLAGS[0] if entry.change > 0 else FLAGS[1]
            entries.append(entry)
    for name, base in before.items():
        if name in seen:
            continue
        if base.shard in carried:
            state, where = "carried", carried[base.shard]
        elif still_open and base.shard not in shards:
            state, where = "running", source
        else:
            state, where = "missing", source
        entries.append(BenchmarkEntry(name=name, shard=base.shard, state=state, unit=base.unit,
                                      value=base.value if state == "carried" else None, baseline=base.value,
                                      instructions=base.instructions if state == "carried" else None, source=where))
    rank = {"regression": 0, "improvement": 2, None: 1}
    return sorted(entries, key=lambda e: (rank[e.flag], -(e.change or 0) if e.flag == "regression" else 0, e.shard, e.name))
