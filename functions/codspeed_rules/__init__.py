"""The rules both sides apply, with the standard library only: what a shard's bundle may hold
and what names may be. The aggregator validates arrivals with them; ``codspeed-client``
ships them in its own distribution and checks a shard before it sends it."""
