"""Run ids, attempts included (``<run>~N``), as the client and the API check them."""

import re

import pytest
from pydantic import BaseModel, ValidationError

from codspeed_aggregator.domain.attempts import named_attempt
from codspeed_aggregator.domain.errors import Unprocessable
from codspeed_rules.names import run_id_problem
from codspeed_wire.names import RunId


class _Named(BaseModel):
    run_id: RunId


@pytest.mark.parametrize("value", ["7044765741", "7044765741~2", "run-1.2:3+4", "a~9999", "gl-0123abcd-ef~12"])
def test_run_ids_and_their_attempts_are_accepted(value):
    assert run_id_problem(value) is None and _Named(run_id=value).run_id == value


@pytest.mark.parametrize(
    "value, says",
    [
        ("7002~0", "'7002~0' names attempt 0: attempts count from 1 (<run> itself is attempt 1)"),
        ("7002~", "'7002~' ends with '~' but names no attempt: give <run>~N, N from 1"),
        ("7002~x", "'7002~x' names attempt 'x': an attempt is a number from 1 to 9999"),
        ("7002~10000", "'7002~10000' names attempt '10000': an attempt is a number from 1 to 9999"),
        ("7002~2~3", "'7002~2~3' names attempt '2~3': an attempt is a number from 1 to 9999"),
        ("run 1", "'run 1' is not a run id: letters, digits and _.:+- only (up to 128), then ~N for attempt N"),
        ("~2", "'~2' is not a run id"),
    ],
)
def test_a_bad_run_id_or_attempt_is_refused_in_one_sentence_naming_it(value, says):
    assert run_id_problem(value).startswith(says)
    with pytest.raises(ValidationError, match="run_id") as caught:
        _Named(run_id=value)
    assert says in str(caught.value)


def test_an_attempt_past_the_ci_s_limit_is_refused_and_none_names_the_latest():
    """GitHub re-runs a workflow run 50 times at most: 51 attempts."""
    assert named_attempt("7002") is None and named_attempt("7002~1") == 1 and named_attempt("7002~51") == 51
    with pytest.raises(Unprocessable, match="run 7002~52 names attempt 52, but a run has at most 51 attempts"):
        named_attempt("7002~52")


def test_a_name_is_whole_a_trailing_newline_never_passes_a_rule():
    from codspeed_rules.names import is_ci_url, is_commit, is_project, is_run_id, is_shard_name, pull_request

    for check, good in (
        (is_project, "acme/widgets"),
        (is_run_id, "96230139"),
        (is_shard_name, "lint"),
        (is_commit, "a" * 40),
        (is_ci_url, "https://ci.example/run/1"),
    ):
        assert check(good) and not check(good + "\n"), check.__name__
    assert pull_request("refs/pull/7/merge") == 7 and pull_request("refs/pull/7/merge\n") is None


@pytest.mark.parametrize("value", ["7002~²", "7002~١"])  # digits to str.isdigit, not to the rule
def test_an_attempt_of_other_digits_is_a_sentence_not_a_crash(value):
    assert "an attempt is a number from 1 to 9999" in run_id_problem(value)


def test_a_pushed_shard_is_keyed_by_its_name_and_executor_and_no_shard_name_holds_the_separator():
    from codspeed_rules.names import SHARD_KEY_PATTERN, is_shard_name, shard_key, split_shard_key

    assert shard_key("1", "valgrind") == "1" and shard_key("1", "walltime") == "1~walltime"
    assert split_shard_key("1~walltime") == ("1", "walltime") and split_shard_key("1") == ("1", None)
    assert not is_shard_name("1~walltime")  # a client cannot name a shard what another executor's is keyed as
    assert re.fullmatch(SHARD_KEY_PATTERN, "1~walltime") and not re.fullmatch(SHARD_KEY_PATTERN, "1~walltime\n")
