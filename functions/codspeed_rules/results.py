"""pytest-codspeed's ``results/<pid>.json``: its name, which names its process, and the timings of a
walltime run's benchmarks in it."""

import json
import re
from collections.abc import Mapping
from typing import Any

# A benchmark's figures as its bundle holds them: callgrind's event counts (``Ir``, ``I1mr``, ...) or
# pytest-codspeed's walltime stats (``mean_ns``, ``rounds``, ...), by name
RawFigures = Mapping[str, float]
RESULTS_NAME = re.compile(r"^results/(?P<pid>[0-9]{1,10})\.json$")
MAX_RESULTS_JSON = 16 << 20  # a results/<pid>.json read for its timings: larger ones are passed over
WALLTIME_STATS = ("mean_ns", "stdev_ns", "median_ns", "rounds", "total_time", "warmup_iters")  # total_time: seconds


def walltime_results(document: bytes) -> dict[str, RawFigures]:
    """Each benchmark's timing stats in a ``results/<pid>.json`` (pytest-codspeed's walltime
    output); nothing for one without (valgrind's) or that does not parse: it is not checked."""
    try:
        benchmarks = json.loads(document).get("benchmarks") or []
    except (ValueError, AttributeError):
        return {}
    listed = benchmarks if isinstance(benchmarks, list) else []
    return dict(measured for benchmark in listed if isinstance(benchmark, dict) and (measured := _timed(benchmark)))


def _timed(benchmark: dict[str, Any]) -> tuple[str, RawFigures] | None:
    """A benchmark's name and timings, None where it says neither."""
    stats, uri = benchmark.get("stats"), benchmark.get("uri") or benchmark.get("name")
    if not isinstance(stats, dict) or not isinstance(uri, str):
        return None
    timings = {k: stats[k] for k in WALLTIME_STATS if isinstance(stats.get(k), (int, float))}
    config = benchmark.get("config")
    if isinstance(config, dict) and isinstance(config.get("warmup_time_ns"), (int, float)):
        timings["warmup_time_ns"] = config["warmup_time_ns"]  # how long its warm-up ran: its cost
    return uri, timings
