"""What a run's commit status says on GitHub: pending while shards come in, then the outcome
(a failure when shards are missing, the forward failed, or benchmarks regressed past the threshold)."""

from codspeed_rules.summary import plural, shards_done
from codspeed_wire.report import Report

CONTEXT = "codspeed/shards"


def commit_status(report: Report) -> tuple[str, str] | None:
    """(state, description) for GitHub's statuses API, or None while no shard has arrived."""
    expected = "?" if report.expected is None else report.expected
    if not report.final:
        if report.arrived == 0:
            return None  # quiet until the first shard
        doing = ": finishing, what is not upstream yet going now" if report.state == "finalizing" else ""
        return "pending", f"{report.arrived}/{expected} shards in{doing}"
    missing = [s.shown for s in report.shards if s.state == "missing"]  # as the comment and status name them
    done = shards_done(report.arrived, report.carried, expected, then="")  # a carried shard is done
    if report.state == "forward_failed":
        return "failure", "forwarding the merged upload failed: redrive it"
    if report.state == "closed_empty":
        return "failure", "closed with no shard arrived: nothing sent"
    if missing:
        return "failure", f"forwarded {done}; missing: {', '.join(missing)}"[:140]
    if report.overlaps_total:
        return "failure", f"{plural(report.overlaps_total, 'benchmark')} measured in two shards; forwarded {done}"[:140]
    if report.counts.regressions:  # the regression gate: the stack's RegressionThreshold
        worst = report.counts.worst_regression
        return "failure", (
            f"{plural(report.counts.regressions, 'regression')} past {report.threshold:.0%}"
            + (f" (worst {worst:+.1%})" if worst is not None else "")
            + f"; forwarded {done}"
        )[:140]
    return "success", f"forwarded {done}"
