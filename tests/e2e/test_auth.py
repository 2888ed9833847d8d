"""Every auth case answers its status (404 where the call was allowed: the run does not exist)."""

from tests.auth_cases import cases
from tests.conftest import WEBHOOK_SECRET


def test_every_auth_case_gets_its_status(stack):
    from codspeed_aggregator.wiring import for_operator

    seen = {name: call().status_code for name, call, _ in cases(stack, for_operator().project_tokens, WEBHOOK_SECRET)}
    expected = {name: status for name, _, status in cases(stack, for_operator().project_tokens, WEBHOOK_SECRET)}
    assert seen == expected
