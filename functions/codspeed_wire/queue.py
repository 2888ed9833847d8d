"""The finalize queue's message: finish one run, or one upload (run part) of it, or send one
shard of a parts run upstream as it was counted."""

from .model import WireModel


class FinalizeMessage(WireModel):
    project: str
    run_id: str
    reason: str
    part: int | None = None  # one upload of a run forwarded in several: merged in an invocation of its own
    shard: str | None = None  # one shard of a parts run, sent as its own run part
