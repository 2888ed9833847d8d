"""What the domain raises when a record it must find is gone."""

import pytest

from codspeed_aggregator.domain.errors import Gone, existing


def test_a_record_that_must_be_there_is_handed_back_and_one_gone_says_which():
    assert existing(0, "run 7 of acme/widgets") == 0  # falsy, but there
    with pytest.raises(Gone, match=r"^run 7 of acme/widgets is gone: its records expired meanwhile$"):
        existing(None, "run 7 of acme/widgets")
