"""What a run's commit status says on GitHub: pending while shards come in, then the outcome
(a failure when shards are missing, the forward failed, or benchmarks regressed past the threshold)."""

from codspeed_rules.summary import listed, plural, shards_done
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
    done = shards_done(report.arrived, report.carried, expected, then="")  # a carried shard is done
    if report.state == "forward_failed":
        return "failure", "forwarding the merged upload failed: redrive it"
    if report.state == "closed_empty":
        return "failure", "closed with no shard arrived: nothing sent"
    reasons = _reasons(report, named=True)
    if not reasons:
        return "success", f"forwarded {done}"
    said = f"forwarded {done}; " + "; ".join(reasons)
    if len(said) > DESCRIPTION:  # names give way to counts: every reason still said, the run page names them
        said = f"forwarded {done}; " + "; ".join(_reasons(report, named=False))
    return "failure", said[:DESCRIPTION]


DESCRIPTION = 140  # GitHub's most for a status's description


def _reasons(report: Report, named: bool) -> list[str]:
    """Why the status fails, in the order they matter: shards missing (or refused), then benchmarks that
    regressed, then benchmarks two shards measured; each with its count, shards by the names readers know."""
    reasons = []
    for state, what in (("missing", "missing"), ("rejected", "rejected")):
        if shards := report.shown_in(state):
            reasons.append(f"{what}: {listed(shards)}" if named else f"{plural(len(shards), 'shard')} {what}")
    if report.counts.regressions:  # the regression gate: the stack's RegressionThreshold
        worst = report.counts.worst_regression
        reasons.append(
            f"{plural(report.counts.regressions, 'regression')} past {report.threshold:.0%}"
            + (f" (worst {worst:+.1%})" if worst is not None else "")
        )
    if report.overlaps_total:
        reasons.append(f"{plural(report.overlaps_total, 'benchmark')} measured in two shards")
    return reasons
