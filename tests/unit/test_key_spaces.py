"""Key spaces that cannot meet, by construction (invariant 15): names drawn from every kind, each a
valid input, never give one storage key or one upstream runPartId to two things.

The kinds: a pushed shard (its name and executor), a runner job (its runPartId, any string the
runner may send but the ones refused at its POST), a single-part runner upload (Buildkite: no
runPart), and the aggregator's own parts (a group's merged parts, a pushed shard sent as it was)."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codspeed_aggregator.domain.drop_in import group_of, job_key, safe_key, shard_of
from codspeed_aggregator.domain.errors import Unprocessable
from codspeed_aggregator.domain.upstream_parts import AGGREGATED_KEY, empty_part_id, merged_part_id
from codspeed_rules.names import EXECUTOR_PATTERN, JOB_MARK, SHARD_KEY_PATTERN, SHARD_PATTERN, is_shard_name, shard_key
from codspeed_rules.runner_json import pushed_part_id
from codspeed_wire.upstream import UploadMetadata
from tests import runner

COMMIT = "0123456789abcdef0123456789abcdef01234567"
NAMES = st.from_regex(SHARD_PATTERN, fullmatch=True).filter(is_shard_name)
EXECUTORS = st.one_of(
    st.sampled_from(["valgrind", "walltime", "memory"]), st.from_regex(rf"^{EXECUTOR_PATTERN}$", fullmatch=True)
)
# what a runner may send as its runPartId: its own shapes, our ids' lookalikes, anything at all
LABELS = st.one_of(
    st.builds(
        lambda job, shard, executor: runner.github_run_part(
            "1", job, executor, matrix={"shard": shard}, job_index=0, job_total=2
        )["runPartId"],
        st.text(min_size=1, max_size=40),
        st.integers(1, 9),
        EXECUTORS,
    ),
    NAMES,
    NAMES.map(lambda name: f"{name}@0123456789"),
    st.text(min_size=1, max_size=300),
).filter(lambda label: AGGREGATED_KEY not in label)
GROUPS = st.one_of(st.just(""), st.just("codspeed-shard-aggregator"), st.text(min_size=1, max_size=80).map(group_of))


def _runner_key(label: str, executor: str) -> str:
    part = {"runId": "1", "runPartId": label, "jobName": "bench", "metadata": {"job-total": 2}}
    return shard_of(
        UploadMetadata.model_validate(
            runner.metadata(b"archive", executor=executor, owner="acme", repository="app", commit=COMMIT, run_part=part)
        )
    ).shard


def _single_part_key(executor: str) -> str:
    return shard_of(
        UploadMetadata.model_validate(
            runner.metadata(
                b"archive",
                executor=executor,
                owner="acme",
                repository="app",
                commit=COMMIT,
                run_part=None,
                environment="BUILDKITE",
            )
        )
    ).shard


@settings(max_examples=300, deadline=None)
@given(
    pushed=st.lists(st.tuples(NAMES, EXECUTORS), min_size=1, max_size=6),
    jobs=st.lists(st.tuples(LABELS, EXECUTORS), min_size=1, max_size=6),
    single=st.lists(EXECUTORS, max_size=3),
)
@pytest.mark.slow
def test_no_pushed_name_is_keyed_like_a_runner_job(pushed, jobs, single):
    # the likeliest attack: a push named like a job's key of the layout before (slug @ digest)
    lookalikes = [(safe_key(label), "valgrind") for label, _ in jobs if is_shard_name(safe_key(label))]
    pushed_keys = {shard_key(name, executor) for name, executor in pushed + lookalikes}
    job_keys = {_runner_key(label, executor) for label, executor in jobs} | {_single_part_key(e) for e in single}
    assert not pushed_keys & job_keys
    # why: every runner key holds the mark, and no pushed key can; both are keys a route reads
    assert all(JOB_MARK in key and re.fullmatch(SHARD_KEY_PATTERN, key) for key in job_keys)
    assert all(JOB_MARK not in key and re.fullmatch(SHARD_KEY_PATTERN, key) for key in pushed_keys)


@settings(max_examples=300, deadline=None)
@given(first=LABELS, second=LABELS)
def test_two_runner_jobs_have_two_keys(first, second):
    assert (job_key(first) == job_key(second)) == (first == second)


@settings(max_examples=300, deadline=None)
@given(
    labels=st.lists(LABELS, max_size=6),
    pushed=st.lists(st.tuples(NAMES, EXECUTORS), max_size=6),
    merged=st.lists(st.tuples(GROUPS, st.integers(1, 50)), max_size=6),
)
@pytest.mark.slow
def test_no_two_parts_of_a_run_share_a_run_part_id_upstream(labels, pushed, merged):
    """A runner's own id (forwarded as it sent it), a pushed shard's, a merged part's: each kind
    holds apart from the others and, within its kind, one id names one thing."""
    kinds = {
        "runner": {label: label for label in labels},
        "pushed": {(name, executor): pushed_part_id(name, executor) for name, executor in pushed},
        "merged": {(group, number): merged_part_id(group, number) for group, number in merged},
        "empty": {"empty": empty_part_id()},
    }
    ids = [part_id for kind in kinds.values() for part_id in kind.values()]
    assert len(ids) == len(set(ids)), kinds


def test_a_runner_id_that_could_be_ours_is_refused_at_its_post():
    """The one construction the runner's side relies on: its ids never hold our JSON keys."""
    for ours in (merged_part_id("bench", 1), merged_part_id("", 1), pushed_part_id("1", "walltime")):
        part = {"runId": "1", "runPartId": ours, "jobName": "bench", "metadata": {}}
        meta = UploadMetadata.model_validate(
            runner.metadata(b"a", executor="valgrind", owner="acme", repository="app", commit=COMMIT, run_part=part)
        )
        with pytest.raises(Unprocessable, match="names the aggregator's own run parts"):
            shard_of(meta)
