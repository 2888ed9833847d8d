"""Projects that are prefixes of each other (GitLab's ``grp/sub`` and ``grp/sub/repo``) never read
or touch each other's runs, whatever their run ids."""

import pytest

from codspeed_aggregator.domain.errors import NotFound
from codspeed_aggregator.domain.keys import run_bundles_prefix
from tests.factories import bundle, push


def test_a_project_never_reads_the_report_of_a_longer_project_whose_run_starts_like_its_own(isolated):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, "grp/sub/repo", "v1secret", "1", bundle(), total=2)["key"])
    assert agg.reports.report("grp/sub/repo", "v1secret").arrived == 1
    with pytest.raises(NotFound, match="no run repo for project grp/sub"):
        agg.reports.report("grp/sub", "repo")  # its report prefix was reports/grp/sub/repo/v: the other's run


def test_finishing_a_run_tags_its_own_bundles_only(isolated):
    agg = isolated.aggregator
    theirs = push(agg, "grp/sub/repo", "r1", "1", bundle(), total=2)["key"]
    assert agg.store.mark_final(run_bundles_prefix("grp/sub", "repo")) == 0  # closing grp/sub's run "repo"
    tags = agg.store.s3.get_object_tagging(Bucket=agg.store.bucket, Key=theirs)["TagSet"]
    assert tags == []  # grp/sub/repo's open run keeps its bundles out of the expiry rule
    mine = push(agg, "grp/sub", "repo", "1", bundle(), total=2)["key"]
    assert agg.store.mark_final(run_bundles_prefix("grp/sub", "repo")) == 1
    assert agg.store.s3.get_object_tagging(Bucket=agg.store.bucket, Key=mine)["TagSet"] == [
        {"Key": "run-final", "Value": "true"}
    ]
