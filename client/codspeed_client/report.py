"""Show a run's report, and wait for it to be final."""

from __future__ import annotations

import time

from .errors import FORWARD_FAILED, OK, SHARDS_MISSING, TIMEOUT

FINAL = ("forwarded", "forward_failed", "closed_empty")


def wait_for_final(api, project: str, run_id: str, timeout: float, interval: float) -> tuple[dict, bool]:
    deadline = time.monotonic() + timeout
    while True:
        report = api.report(project, run_id)
        if report["state"] in FINAL:
            return report, False
        if time.monotonic() + interval > deadline:
            return report, True
        time.sleep(interval)


def final_exit_code(report: dict, timed_out: bool) -> int:
    if timed_out:
        return TIMEOUT
    if report["state"] == "forward_failed":
        return FORWARD_FAILED
    if report["state"] == "closed_empty" or any(s["state"] == "missing" for s in report["shards"]):
        return SHARDS_MISSING
    return OK


def render_text(report: dict) -> str:
    expected = "?" if report.get("expected") is None else report["expected"]
    partial = " (partial: more shards may come)" if report["partial"] else ""
    lines = [f"run {report['run_id']} of {report['project']}: {report['state']}, {report['arrived']}/{expected} shards in{partial}"]
    for s in report["shards"]:
        detail = [s["state"]]
        if s.get("benchmarks") is not None:
            detail.append(f"{s['benchmarks']} benchmarks")
        if s.get("attempt"):
            detail.append(f"attempt {s['attempt']}")
        if s.get("reason"):
            detail.append(s["reason"])
        lines.append(f"  {s['name']}: " + ", ".join(detail))
    upstream = report.get("upstream")
    if upstream:
        lines.append(f"upstream: {upstream['status']} (run {upstream.get('run_id') or '-'}) at {upstream['at']}")
    return "\n".join(lines) + "\n"
