"""Every custom metric the functions put (namespace ``CodSpeedAggregator``), named once: each is billed a
month (bench/billing.py reads this list), and a name not here is refused where it is put."""

METRICS = frozenset(
    {
        # arrivals: what became of each (domain.arrival.Arrival.metric), and of its message
        "ShardsCounted",
        "DuplicatesAbsorbed",
        "BundlesRejected",
        "LateBundles",
        "ObjectsIgnored",
        "ArrivalsDeadLettered",
        "ArrivalsDeferred",
        "NormalizedBundlesRedone",
        # the finalizer: forwards, parts and shards sent, closes waiting
        "ForwardSucceeded",
        "ForwardFailed",
        "MergedBytes",
        "FinalizeLatency",
        "PartsSpliced",
        "SpliceFallbacks",
        "ShardsForwarded",
        "ShardForwardFailed",
        "ClosesWaiting",
        # reports deferred to the end of a batch, and the sweeper's closes
        "ReportsDeferred",
        "RunsClosedAtDeadline",
    }
)


def named(name: str) -> str:
    """``name``, a metric of the list: a metric put under any other name would go unbilled and unseen."""
    if name not in METRICS:
        raise ValueError(f"metric {name!r} is not in domain/metric_names.py's METRICS")
    return name
