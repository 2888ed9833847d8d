"""The close's barrier as a rule: which uploads granted before a close it still waits for, and until when."""

from codspeed_aggregator.domain.barrier import Grant, awaited, pending
from codspeed_aggregator.domain.ledger import ShardRecord

EXPIRY, GRACE = 600, 300


def _shard(name: str, state: str) -> ShardRecord:
    return ShardRecord(name=name, state=state)


def test_only_grants_of_shards_with_nothing_counted_are_pending():
    grants = [Grant("1", "a", 0.0), Grant("2", "b", 0.0), Grant("3", "c", 0.0), Grant("4", "d", 0.0)]
    shards = {"1": _shard("1", "arrived"), "2": _shard("2", "rejected"), "3": _shard("3", "expected")}
    assert [g.shard for g in pending(grants, shards)] == ["3", "4"]


def test_a_good_url_is_awaited_an_expired_one_only_with_its_bundle_in_the_bucket_and_not_forever():
    sent, lost = Grant("1", "a", 1000.0), Grant("2", "b", 1000.0)
    assert awaited([sent, lost], set(), 1000.0 + EXPIRY - 1, EXPIRY, GRACE).grants == (sent, lost)  # PUTs may be on
    assert not awaited([sent, lost], set(), 1000.0 + EXPIRY, EXPIRY, GRACE)  # expired, nothing came: not coming
    waiting = awaited([sent, lost], {"a"}, 1000.0 + EXPIRY, EXPIRY, GRACE)
    assert waiting.grants == (sent,) and waiting.until == 1000.0 + EXPIRY + GRACE  # its event may still come
    assert not awaited([sent], {"a"}, 1000.0 + EXPIRY + GRACE, EXPIRY, GRACE)  # no run waits forever
