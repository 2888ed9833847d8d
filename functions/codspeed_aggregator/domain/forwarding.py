"""How a run goes upstream: the mode it was opened in, the finalizer's claim and plan, how its
forward ended and whether what follows its end is done."""

from dataclasses import dataclass

from codspeed_wire.report import UpstreamEntry

from .plan_record import PlanRecord


@dataclass(frozen=True)
class RunForward:
    """A run record's forward. ``sends_parts``: each shard goes upstream as it is counted (the forward
    mode when the run was opened; its attempts keep it). ``by_executor``: a Buildkite build (CodSpeed's
    runner sends it no run parts): one upload an executor, no runPart, the whole run again each attempt,
    once its close (the gate, the deadline) ends it. ``lease_until``: the claiming finalizer's lease;
    ``plan``: what it decided (baseline, parts, parts it sends, the S3 plan's version). ``upstream`` and
    ``error``: how the forward ended, as the report says it. ``owed``: ended (forwarded, closed empty)
    with what follows its end not yet all done. The ledger's ``Runs`` writes it."""

    sends_parts: bool = False
    by_executor: bool = False
    lease_until: int = 0
    plan: PlanRecord | None = None
    upstream: UpstreamEntry | None = None
    error: str | None = None
    owed: bool = False
