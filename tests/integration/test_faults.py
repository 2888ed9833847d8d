"""A crash at every step of arrival and finalization: redelivery or retry ends in exactly one forward."""

import pytest

from tests.faults import ARRIVAL_FAULTS, FINALIZE_FAULTS, arrival_scenario, finalize_scenario


@pytest.mark.parametrize("step", FINALIZE_FAULTS)
@pytest.mark.slow
def test_a_finalizer_crash_then_a_retry_forwards_exactly_once(isolated, step):
    finalize_scenario(isolated, step)


@pytest.mark.parametrize("step", ARRIVAL_FAULTS)
@pytest.mark.slow
def test_an_arrival_crash_then_redelivery_counts_once_and_forwards_once(isolated, step):
    arrival_scenario(isolated, step)
