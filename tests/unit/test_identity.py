"""What every shard of a run agrees on, and the sentence that refuses one that differs."""

import pytest

from codspeed_aggregator.domain.errors import Conflict
from codspeed_aggregator.domain.identity import RunIdentity, check_identity

RUN = RunIdentity("ab" * 20, "acme", "widgets", "refs/heads/main")


def test_a_shard_of_another_ref_is_refused_naming_the_field_as_the_metadata_names_it():
    with pytest.raises(Conflict) as refused:
        check_identity(RUN, RunIdentity("ab" * 20, "acme", "widgets", "refs/heads/fix"))
    assert str(refused.value) == (
        "metadata field ref is 'refs/heads/fix' in this shard but 'refs/heads/main' in the run: "
        "every shard of a run must agree on it"
    )


def test_the_same_identity_or_none_known_passes():
    check_identity(RUN, RunIdentity.of(RUN.said()))
    check_identity(None, RUN)
    check_identity(RUN, None)


def test_a_run_items_copy_is_read_as_1_0_0_wrote_it():
    stored = '{"commitHash": "' + "ab" * 20 + '", "owner": "acme", "ref": "refs/heads/main", "repository": "widgets"}'
    assert RunIdentity.from_json(stored) == RUN and RUN.to_json() == stored
    assert RunIdentity.from_json("null") is None and RunIdentity.from_json(None) is None
    assert RUN.first_difference(RunIdentity("cd" * 20, "acme", "widgets", None)) == ("commitHash", "cd" * 20, "ab" * 20)
