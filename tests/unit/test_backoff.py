"""The one backoff every retry of ours waits by (botocore's and urllib3's own aside)."""

import pytest

from codspeed_rules.backoff import backoff


def test_it_doubles_from_its_base_up_to_its_cap():
    assert [backoff(a, 0.5, 30.0, jitter=False) for a in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert backoff(-1, 60, 900, jitter=False) == 60  # a count from 1 given as 0 - 1 waits the base


def test_its_jitter_is_half_to_all_of_the_wait():
    waits = [backoff(3, 1.0, 60.0) for _ in range(500)]
    assert 4.0 <= min(waits) and max(waits) <= 8.0 and len(set(waits)) > 400


def test_one_retry_policy_waits_what_retry_after_says_in_either_form_at_most_its_cap():
    from email.utils import formatdate

    from codspeed_rules.backoff import retry_delay

    now = 1_800_000_000.0
    assert retry_delay(0, 1.0, 60.0, "7", now) == 7.0
    assert retry_delay(0, 1.0, 60.0, formatdate(now + 12, usegmt=True), now) == pytest.approx(12.0)
    assert retry_delay(0, 1.0, 60.0, formatdate(now - 5, usegmt=True), now) == 0.0  # a date passed: at once
    assert retry_delay(0, 1.0, 60.0, "3600", now) == 60.0  # never past the cap
    for garbage in (None, "", "soon", "-3"):  # not a form HTTP allows: the backoff
        assert 0.5 <= retry_delay(0, 1.0, 60.0, garbage, now) <= 1.0


def test_an_answer_is_worth_another_try_as_codspeeds_runner_retries_it():
    from codspeed_rules.backoff import retryable

    assert all(retryable(s) for s in (408, 429, 500, 502, 503, 504, 599))
    assert not any(retryable(s) for s in (200, 301, 400, 401, 403, 404, 409, 413, 422))


def test_one_retry_loop_tries_at_most_its_tries_and_waits_what_the_answer_said():
    from codspeed_rules.backoff import Retry, with_retries

    waits, outcomes = [], [Retry("503", "7"), Retry("reset"), "done"]
    assert with_retries(lambda: outcomes.pop(0), 3, 1.0, 60.0, waits.append) == "done"
    assert waits[0] == 7.0 and 1.0 <= waits[1] <= 2.0  # Retry-After, then the backoff's second step
    tried = []
    last = with_retries(lambda: tried.append(1) or Retry("503", answer="a"), 2, 1.0, 60.0, lambda _: None)
    assert (len(tried), last.why, last.answer) == (2, "503", "a")  # the last try's, for the caller to say
