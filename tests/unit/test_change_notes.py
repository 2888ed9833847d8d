"""The notes of which shard each change of a tally changed: whatever revision the writers read
before they wrote, the notes either name every shard changed since a revision or say they cannot."""

from hypothesis import given, settings
from hypothesis import strategies as st

from codspeed_aggregator.adapters.ledger.codec import CHANGE_NOTES, note_sk, noted_shards, notes_wanted

TALLY = "RUN#TALLY#03"


class Tally:
    """One tally and its notes, as DynamoDB applies each change's transaction."""

    def __init__(self) -> None:
        self.rev, self.notes = 0, {}

    def write(self, shard: str, seen: int | None) -> None:
        self.rev += 1
        if seen is not None:  # None: a change whose note is gone
            self.notes[note_sk(TALLY, seen + 1)] = {"rev": seen + 1, "shard": shard}

    def named_since(self, since: int) -> set[str] | None:
        wanted = notes_wanted(TALLY, since, self.rev)
        return None if wanted is None else noted_shards(wanted, self.notes)


# A writer: the shard it changes, and how far behind the tally's revision its read was (None: no note).
WRITERS = st.lists(
    st.tuples(st.sampled_from(["1", "2", "a|b", "shard-7"]), st.one_of(st.none(), st.integers(0, 3))),
    max_size=CHANGE_NOTES + 20,
)


@settings(max_examples=300, deadline=None)
@given(WRITERS)
def test_the_notes_name_every_shard_changed_since_or_nothing(writers):
    tally, history = Tally(), []  # history[i]: the shard change i + 1 changed
    for shard, lag in writers:
        tally.write(shard, None if lag is None else max(0, tally.rev - lag))
        history.append(shard)
    for since in range(len(history) + 1):
        named = tally.named_since(since)
        assert named is None or named == set(history[since:])
        if named is None and all(lag == 0 for _, lag in writers[since:]):
            # writers that read the latest revision are always named, as far back as the notes reach
            assert len(history) - since > CHANGE_NOTES


def test_writers_that_read_the_same_revision_lose_a_note_and_the_notes_say_so():
    tally = Tally()
    tally.write("1", 0)
    tally.write("2", 0)  # read before "1" was written: notes the same place
    assert tally.named_since(0) is None and tally.named_since(2) == set()
    tally.write("3", 2)
    assert tally.named_since(2) == {"3"} and tally.named_since(1) is None


def test_a_revision_the_tally_is_not_at_and_changes_past_what_it_keeps_are_not_named():
    tally = Tally()
    tally.write("1", 0)
    assert tally.named_since(0) == {"1"} and tally.named_since(5) is None
    for n in range(CHANGE_NOTES):
        tally.write(str(n), tally.rev)
    assert tally.named_since(0) is None and tally.named_since(1) == {str(n) for n in range(CHANGE_NOTES)}
    assert len({note_sk(TALLY, r) for r in range(1, 2 * CHANGE_NOTES)}) == CHANGE_NOTES  # a fixed set of items
