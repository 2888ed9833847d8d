"""Which run and shard a CodSpeed runner's upload is (domain.drop_in), from the runner's own metadata."""

import re

import pytest

from codspeed_aggregator.domain.drop_in import safe_key, shard_of
from codspeed_aggregator.domain.errors import Unprocessable
from codspeed_aggregator.domain.manifest import Manifest
from codspeed_rules.names import SHARD_PATTERN
from codspeed_wire.upstream import UploadMetadata
from tests import runner

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _meta(run_part, executor="valgrind", **kwargs) -> UploadMetadata:
    return UploadMetadata.model_validate(runner.metadata(b"archive", executor=executor, owner="acme", repository="app",
                                                         commit=COMMIT, run_part=run_part, **kwargs))


def test_a_github_matrix_job_is_a_shard_of_the_workflow_run_with_the_matrix_size_as_manifest():
    part = runner.github_run_part("7044765741", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=2)
    place = shard_of(_meta(part))
    assert place.run_id == "7044765741" and place.manifest == Manifest(total=2)
    assert place.label == 'bench-{"shard":1}-{"job-index":0,"job-total":2}-{"executor":"valgrind","run-index":0}'
    assert place.shard.startswith("bench-shard-1-job-index-0-job-total-2-executor-valgrind-run-index-0@")
    assert place.variant == "valgrind/0"


def test_a_re_run_is_the_same_shard_and_another_executor_or_invocation_is_another():
    def place(executor="valgrind", run_index=0, shard=1):
        return shard_of(_meta(runner.github_run_part("1", "bench", executor, matrix={"shard": shard}, job_index=shard - 1,
                                                     job_total=2, run_index=run_index), executor=executor))

    assert place().shard == place().shard
    assert len({place().shard, place("walltime").shard, place(run_index=1).shard, place(shard=2).shard}) == 4
    assert {place().variant, place("walltime").variant, place(run_index=1).variant} == {"valgrind/0", "walltime/0", "valgrind/1"}
    assert place(shard=2).variant == place().variant  # the manifest counts jobs per variant


def test_long_and_odd_run_part_ids_get_short_safe_distinct_keys():
    matrix = {"python": "3.12", "os": "ubuntu-24.04 / arm", "note": "ü" * 200, "q": 'a"b'}
    part = runner.github_run_part("1", "bench", "valgrind", matrix=matrix, job_index=0, job_total=4)
    place = shard_of(_meta(part))
    assert len(place.label) > 300 and len(place.shard) <= 100
    assert re.match(SHARD_PATTERN, place.shard)
    assert safe_key("a b") != safe_key("a-b") and safe_key("").startswith("part@")


def test_gitlab_jobs_of_one_pipeline_are_grouped_by_commit_and_ref_with_parallel_as_manifest():
    def place(index, ref="refs/heads/main", name=None):
        part = runner.gitlab_run_part(str(100 + index), name or f"bench {index}/3", "valgrind")
        return shard_of(_meta(part, provider="GITLAB", environment="GITLAB_CI", ref=ref))

    one, two = place(1), place(2)
    assert one.run_id == two.run_id and one.run_id.startswith(f"gl-{COMMIT[:12]}-") and one.shard != two.shard
    assert one.manifest == Manifest(total=3)
    assert place(1, ref="refs/heads/other").run_id != one.run_id
    assert place(1, name="bench").manifest == Manifest()  # not a parallel job: closed by hand or at the deadline


def test_without_a_run_part_an_upload_is_a_run_of_one():
    place = shard_of(_meta(None, environment="BUILDKITE", gh_data={"runId": "build-9", "job": "bench"}))
    assert (place.run_id, place.shard, place.manifest) == (f"{COMMIT[:12]}-build-9-bench", "1", Manifest(total=1, indexed=True))


@pytest.mark.parametrize("total", [-5, 0, 1001])
def test_a_matrix_size_out_of_range_is_refused(total):
    part = runner.github_run_part("1", "bench", "valgrind", matrix={"shard": 1}, job_index=0, job_total=total)
    with pytest.raises(Unprocessable, match=f"job-total is {total}"):
        shard_of(_meta(part))


def test_a_run_id_that_is_not_a_usable_name_is_made_one():
    part = runner.github_run_part("run id/../with spaces", "bench", "valgrind")
    run_id = shard_of(_meta(part)).run_id
    assert run_id.startswith("run-id-..-with-spaces@") and "/" not in run_id
