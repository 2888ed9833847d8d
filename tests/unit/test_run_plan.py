"""A run's plan as it is kept: read and written by one codec, which keeps what a later release
added (a release rolled back reads a newer plan) and reads the forms earlier releases wrote."""

import json

from hypothesis import given
from hypothesis import strategies as st

from codspeed_aggregator.domain.outcome import Outcome
from codspeed_aggregator.domain.plan_record import PlanRecord
from codspeed_aggregator.domain.records import ARRIVED, ShardRecord
from codspeed_aggregator.domain.run_plan import RunPlan
from codspeed_aggregator.domain.upstream_parts import UpstreamPart

SHARDS = {name: ShardRecord(name=name, state=ARRIVED, key=f"bundles/p/r/{name}/u.tar.gz") for name in ("a", "b")}
PLAN = RunPlan(
    baseline="7001",
    uploads=[UpstreamPart(("a",), True, "", "g-1"), UpstreamPart(("b",), False)],
    ids=["i0", "i1"],
    held={"shard:b": "i1"},
    todo=[0],
    outcome=Outcome(),
    shards=SHARDS,
    carried=[],
    first="a",
)
RECORD = PlanRecord(baseline="7001", parts=2, sends=1, version="v1", parts_at="0123456789abcdef")
LATER = st.dictionaries(
    st.text(min_size=1).filter(lambda k: k not in PLAN.to_item() and k not in RECORD.to_item()),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda v: st.lists(v, max_size=3)),
    max_size=4,
)


def _through_json(item: dict) -> dict:
    return json.loads(json.dumps(item))


def test_a_plan_is_read_back_as_it_was_written():
    assert RunPlan.from_item(_through_json(PLAN.to_item())) == PLAN
    assert PlanRecord.from_item(_through_json(RECORD.to_item())) == RECORD


@given(LATER)
def test_the_fields_a_later_release_wrote_are_kept_and_written_back_as_they_came(later):
    for kept in (PLAN, RECORD):
        newer = {**kept.to_item(), **later}
        read = type(kept).from_item(_through_json(newer))
        assert read.later_fields == later
        assert read.to_item() == newer
        assert read == type(kept)(**{**kept.__dict__, "later_fields": later})
