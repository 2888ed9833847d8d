"""The CodSpeed metadata a forwarded upload goes under (``domain.metadata``)."""

from codspeed_aggregator.domain.metadata import as_carried
from codspeed_aggregator.domain.records import ARRIVED, ShardRecord
from tests.factories import metadata


def test_a_shard_carried_alone_keeps_the_runs_metadata_under_its_own_run_part_and_executor():
    base = metadata(
        None,
        run_part={
            "runId": "7044",
            "runPartId": 'bench-{"executor":"valgrind"}',
            "jobName": "bench",
            "metadata": {"executor": "valgrind"},
        },
    )
    runner_shard = ShardRecord(
        name="walltime@1a2b", state=ARRIVED, label='bench-{"executor":"walltime"}', executor="walltime"
    )
    carried = as_carried(base, runner_shard)
    assert carried["runPart"] == {**base["runPart"], "runPartId": 'bench-{"executor":"walltime"}'}
    assert carried["runner"] == {**base["runner"], "executor": "walltime"}
    assert {k: v for k, v in carried.items() if k not in ("runPart", "runner")} == {
        k: v for k, v in base.items() if k not in ("runPart", "runner")
    }
    assert base["runPart"]["runPartId"] == 'bench-{"executor":"valgrind"}'  # the run's own is left as it was
    # a pushed shard's: the aggregator's own, for its name and executor
    assert (
        as_carried(base, ShardRecord(name="3", state=ARRIVED))["runPart"]["runPartId"]
        == 'codspeed-shard-aggregator-{"aggregated-shard":"3","executor":"valgrind"}'
    )
    walltime = as_carried(base, ShardRecord(name="3~walltime", state=ARRIVED, executor="walltime"))
    assert (
        walltime["runPart"]["runPartId"] == 'codspeed-shard-aggregator-{"aggregated-shard":"3","executor":"walltime"}'
    )
