"""The shard aggregator: thin Lambda handlers over a domain that knows nothing of Lambda."""
