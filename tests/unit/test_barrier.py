"""The close's barrier as a rule: which uploads granted before a close it still waits for, and until when."""

from codspeed_aggregator.domain.barrier import Grant, Landed, judge, pending
from codspeed_aggregator.domain.closing import Awaiting, CiOrigin, closing_said
from codspeed_aggregator.domain.records import ShardRecord

EXPIRY = 600
GATE = CiOrigin("7001", 1)  # the gate's close: the jobs of CI run 7001, attempt 1, have ended


def backstop(size: int) -> float:
    return 80 + size / 1000


def _shard(name: str, state: str) -> ShardRecord:
    return ShardRecord(name=name, state=state)


def test_only_grants_of_shards_with_nothing_counted_and_not_given_up_are_pending():
    grants = [Grant(n, n, 0.0) for n in ("1", "2", "3", "4", "5")]
    shards = {"1": _shard("1", "arrived"), "2": _shard("2", "rejected"), "3": _shard("3", "expected")}
    assert [g.shard for g in pending(grants, shards, frozenset({"5"}))] == ["3", "4"]


def test_a_grant_of_the_closing_ci_run_with_nothing_in_the_bucket_is_not_coming_at_once():
    crashed = Grant("2", "b", 1000.0, CiOrigin("7001", 1))
    assert not judge([crashed], {}, GATE, 1001.0, EXPIRY, backstop)  # missing at once, not in 600 s
    unknown_attempt = Grant("2", "b", 1000.0, CiOrigin("7001"))  # a runner job without an OIDC token
    assert not judge([unknown_attempt], {}, GATE, 1001.0, EXPIRY, backstop)


def test_a_grant_the_close_cannot_tell_as_its_own_is_awaited_while_its_url_is_good():
    others = [
        Grant("2", "b", 1000.0, CiOrigin("7002", 1)),  # another workflow sharing the run id
        Grant("3", "c", 1000.0, CiOrigin("7001", 2)),  # a later CI attempt than the close's (a late webhook)
        Grant("4", "d", 1000.0),  # a GitLab or Buildkite runner job: no CI run said
    ]
    waiting = judge(others, {}, GATE, 1001.0, EXPIRY, backstop)
    assert [w.grant.shard for w in waiting.waits] == ["2", "3", "4"] and waiting.until == 1000.0 + EXPIRY
    assert not judge(others, {}, GATE, 1000.0 + EXPIRY, EXPIRY, backstop)  # expired with nothing: not coming
    own = Grant("2", "b", 1000.0, CiOrigin("7001", 1))
    assert judge([own], {}, None, 1001.0, EXPIRY, backstop)  # a deadline awaits every good URL


def test_a_bundle_in_the_bucket_is_awaited_until_its_backstop_then_handed_over():
    own = Grant("2", "b", 1000.0, CiOrigin("7001", 1))
    landed = {"b": Landed(size=50_000, at=1010.0)}
    waiting = judge([own], landed, GATE, 1011.0, EXPIRY, backstop)
    assert waiting.waits[0].landed == 1010.0 and waiting.until == 1010.0 + 80 + 50  # sized to the bundle
    overdue = judge([own], landed, GATE, 1010.0 + 130, EXPIRY, backstop)
    assert not overdue and overdue.overdue == (own,)


def test_the_wait_is_said_with_its_first_shard_its_count_and_its_latest_moment():
    said = Awaiting("2", landed=3312.0, count=3, until=3432.0).said()
    assert said == (
        "closing: waiting for shard 2's bundle, in the bucket since 00:55:12, to be counted and 2 more; "
        "00:57:12 UTC at the latest"
    )
    assert Awaiting("x", None, 1, 3600.0).said() == (
        "closing: waiting for shard x's upload, whose URL was handed out before the close; 01:00:00 UTC at the latest"
    )  # the time once
    # before the barrier looked (its LIST failing), nothing is known to be coming or not
    assert closing_said(True, None) == "closing: the run ends once what was uploaded before the close is counted"
    assert closing_said(False, None) is None
