"""codspeed-client: push a shard's CodSpeed profile to the aggregator, close a run, watch its report."""

__version__ = "1.0.0"
