"""Which run and shard a CodSpeed runner's upload is (domain.drop_in), from the runner's own metadata."""

import re

import pytest

from codspeed_aggregator.domain.drop_in import safe_key, shard_of
from codspeed_aggregator.domain.errors import Unprocessable
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_rules.names import SHARD_KEY_PATTERN, SHARD_PATTERN
from codspeed_wire.upstream import UploadMetadata
from tests import runner

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _meta(run_part, executor="valgrind", **kwargs) -> UploadMetadata:
    return UploadMetadata.model_validate(
        runner.metadata(
            b"archive", executor=executor, owner="acme", repository="app", commit=COMMIT, run_part=run_part, **kwargs
        )
    )


def test_a_github_matrix_job_is_a_shard_of_the_workflow_run_with_the_matrix_size_as_manifest():
    part = runner.github_run_part("7044765741", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=2)
    place = shard_of(_meta(part))
    assert place.run_id == "7044765741" and place.manifest == Manifest(total=2) and place.group == "bench"
    assert place.label == 'bench-{"shard":1}-{"job-index":0,"job-total":2}-{"executor":"valgrind","run-index":0}'
    assert place.shard.startswith("bench-shard-1-job-index-0-job-total-2-executor-valgrind-run-index-0!")
    assert place.variant == "valgrind/0"


def test_a_re_run_is_the_same_shard_and_another_executor_or_invocation_is_another():
    def place(executor="valgrind", run_index=0, shard=1):
        return shard_of(
            _meta(
                runner.github_run_part(
                    "1",
                    "bench",
                    executor,
                    matrix={"shard": shard},
                    job_index=shard - 1,
                    job_total=2,
                    run_index=run_index,
                ),
                executor=executor,
            )
        )

    assert place().shard == place().shard
    assert len({place().shard, place("walltime").shard, place(run_index=1).shard, place(shard=2).shard}) == 4
    assert {place().variant, place("walltime").variant, place(run_index=1).variant} == {
        "valgrind/0",
        "walltime/0",
        "valgrind/1",
    }
    assert place(shard=2).variant == place().variant  # the manifest counts jobs per variant


def test_long_and_odd_run_part_ids_get_short_safe_distinct_keys():
    matrix = {"python": "3.12", "os": "ubuntu-24.04 / arm", "note": "ü" * 200, "q": 'a"b'}
    part = runner.github_run_part("1", "bench", "valgrind", matrix=matrix, job_index=0, job_total=4)
    place = shard_of(_meta(part))
    assert len(place.label) > 300 and len(place.shard) <= 100
    assert re.fullmatch(SHARD_KEY_PATTERN, place.shard) and not re.fullmatch(SHARD_PATTERN, place.shard)
    assert safe_key("a b") != safe_key("a-b") and safe_key("").startswith("part@")


def test_gitlab_jobs_of_one_pipeline_are_grouped_by_commit_and_ref_with_parallel_as_manifest():
    def place(index, ref="refs/heads/main", name=None):
        part = runner.gitlab_run_part(str(100 + index), name or f"bench {index}/3", "valgrind")
        return shard_of(_meta(part, provider="GITLAB", environment="GITLAB_CI", ref=ref))

    one, two = place(1), place(2)
    assert one.run_id == two.run_id and one.run_id.startswith(f"gl-{COMMIT[:12]}-") and one.shard != two.shard
    assert one.manifest == Manifest(total=3) and one.group == two.group == "bench"
    assert place(1, ref="refs/heads/other").run_id != one.run_id
    plain = place(1, name="lint-bench")  # not a parallel job: a group of one, in the pipeline's run
    assert (plain.manifest, plain.group, plain.run_id) == (Manifest(total=1), "lint-bench", one.run_id)


def test_without_a_run_part_an_upload_is_a_run_of_one():
    place = shard_of(_meta(None, environment="BUILDKITE", gh_data={"runId": "build-9", "job": "bench"}))
    assert (place.run_id, place.label, place.manifest) == (f"{COMMIT[:12]}-build-9-bench", "1", Manifest(total=1))
    walltime = shard_of(
        _meta(None, executor="walltime", environment="BUILDKITE", gh_data={"runId": "build-9", "job": "bench"})
    )
    assert "!" in place.shard and walltime.shard != place.shard and walltime.run_id == place.run_id


@pytest.mark.parametrize("total", [-5, 0, 1001])
def test_a_matrix_size_out_of_range_is_refused(total):
    part = runner.github_run_part("1", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=total)
    with pytest.raises(Unprocessable, match=f"job-total is {total}"):
        shard_of(_meta(part))


def test_a_run_id_that_is_not_a_usable_name_is_made_one():
    part = runner.github_run_part("run id/../with spaces", "bench", "valgrind")
    run_id = shard_of(_meta(part)).run_id
    assert run_id.startswith("run-id-..-with-spaces@") and "/" not in run_id


def test_each_job_of_a_workflow_is_a_group_and_a_plain_job_is_a_group_of_one():
    plain = shard_of(_meta(runner.github_run_part("9", "lint-bench", "walltime"), executor="walltime"))
    matrix = shard_of(
        _meta(runner.github_run_part("9", "bench", "valgrind", matrix={"shard": 2}, job_index=1, job_total=3))
    )
    assert (plain.run_id, plain.group, plain.manifest) == ("9", "lint-bench", Manifest(total=1))
    assert (matrix.run_id, matrix.group, matrix.manifest) == ("9", "bench", Manifest(total=3))
    odd = shard_of(_meta(runner.github_run_part("9", "bench|py 3.12 ünï" * 8, "valgrind")))
    assert "|" not in odd.group and len(odd.group) <= 64  # a group is a key: no separator, bounded


def test_a_runner_label_reads_as_its_job_and_matrix_and_the_raw_id_is_kept_beside_it():
    from codspeed_aggregator.domain.drop_in import display_label

    matrix = runner.github_run_part("1", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=3)
    assert display_label(matrix["runPartId"]) == "bench [shard 1, job 1/3]"
    other = runner.github_run_part(
        "1", "bench", "walltime", matrix={"python": "3.12"}, job_index=1, job_total=2, run_index=1
    )
    assert display_label(other["runPartId"]) == "bench [python 3.12, job 2/2, walltime, run-index 1]"
    assert display_label(runner.github_run_part("1", "lint", "valgrind")["runPartId"]) == "lint"
    assert display_label(runner.gitlab_run_part("9", "bench 2/4", "valgrind")["runPartId"]) == "bench 2/4"
    for not_a_runners in (None, "3", "shard-{not json", 'a-{"x":1}-[1]'):
        assert display_label(not_a_runners) is None


def test_a_buildkite_job_named_by_its_upload_url_is_a_shard_of_its_build_s_run():
    from codspeed_aggregator.domain.drop_in import BuildkiteJob, ci_run_of, shard_of

    job = BuildkiteJob.from_path("0190a3c4-build", "step-7", "1", "3", "018f-job")
    metadata = _meta(None, environment="BUILDKITE")
    place = shard_of(metadata, job)
    assert (place.run_id, place.label, place.group, place.manifest.expected_count()) == (
        "0190a3c4-build",
        "step-7 2/3",
        "step-7",
        3,
    )
    retried = BuildkiteJob.from_path("0190a3c4-build", "step-7", "1", "3", "0190-job-retried")
    assert shard_of(metadata, retried).shard == place.shard  # a retried job (a new id) replaces its upload
    alone = shard_of(metadata, BuildkiteJob.from_path("0190a3c4-build", "bench-walltime", "0", "1", "0191-job"))
    assert (alone.label, alone.group, alone.manifest.expected_count()) == ("bench-walltime", "bench-walltime", 1)
    assert ci_run_of(metadata, job) == "0190a3c4-build" and ci_run_of(metadata) is None
    assert shard_of(metadata).run_id != place.run_id  # at /upload: a run of one, as before
