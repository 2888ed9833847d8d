"""Every kind of bad input is refused with a reason that names it, and the run is untouched."""

import pytest

from tests.bad_inputs import CASES, Target


@pytest.fixture(scope="module")
def target(stack):
    from codspeed_aggregator.wiring import arrivals

    return Target(stack.api_url, stack.token, arrivals())


def test_there_are_at_least_thirty_kinds():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name, refuse", CASES, ids=[name for name, _ in CASES])
def test_bad_input_is_refused_cleanly(target, name, refuse):
    refuse(target, name)
