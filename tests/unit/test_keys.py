"""One key layout in which no project's keys are a prefix of another's, whatever the run ids."""

import itertools
from urllib.parse import quote_plus, unquote_plus

import pytest

from codspeed_aggregator.domain.errors import BadBundle
from codspeed_aggregator.domain.keys import (
    bundle_key,
    index_key,
    is_report_key,
    normalized_key,
    parse_bundle_key,
    report_key,
    report_prefix,
    run_bundles_prefix,
    spool_key,
)

PROJECTS = ["grp/sub", "grp/sub/repo", "grp/sub/repo/deeper", "a/b", "a/bc", "a.b/c-d_e"]
RUN_IDS = ["repo", "v1secret", "deeper", "7002", "7002~2", "7002~20", "x:y+z", "r.1", "v"]


def _places(project: str, run_id: str) -> list[str]:
    """Every key and prefix of one run: what a listing, a tag or a read of it may reach."""
    bundle = bundle_key(project, run_id, "1", "0123abcd")
    return [
        run_bundles_prefix(project, run_id),
        bundle,
        normalized_key(bundle),
        index_key(bundle),
        report_prefix(project, run_id),
        report_key(project, run_id, 3),
        spool_key(project, run_id, 0),
    ]


def test_no_runs_keys_are_a_prefix_of_another_projects_or_runs():
    runs = list(itertools.product(PROJECTS, RUN_IDS))
    for (p1, r1), (p2, r2) in itertools.permutations(runs, 2):
        for mine, theirs in itertools.product(_places(p1, r1), _places(p2, r2)):
            assert not theirs.startswith(mine), (p1, r1, mine, p2, r2, theirs)


@pytest.mark.parametrize("project, run_id", list(itertools.product(PROJECTS, RUN_IDS)))
def test_a_bundle_key_reads_back_as_it_was_made_even_through_s3s_event_encoding(project, run_id):
    key = bundle_key(project, run_id, "shard=1", "0123abcd")
    assert "%2F" in key.split("/")[1] and key.count("/") == 4  # the project is one segment
    in_event = quote_plus(key, safe="/")  # S3 URL-encodes keys in event notifications: % arrives as %25
    assert "%252F" in in_event
    assert parse_bundle_key(unquote_plus(in_event)) == (project, run_id, "shard=1", "0123abcd")


def test_a_key_of_no_layout_a_release_wrote_is_no_bundle_key():
    """The layout of before the project's segment (its own slashes in the key) was read "for one
    release": no release wrote it."""
    with pytest.raises(BadBundle, match="is not a bundle key"):
        parse_bundle_key("bundles/grp/sub/repo/r1/1/0123abcd.tar.gz")
    prefix = report_prefix("grp/sub", "repo")
    assert is_report_key(prefix, f"{prefix}0000000003.json") and not is_report_key(prefix, f"{prefix}1x/v1.json")


@pytest.mark.parametrize(
    "key",
    [
        "bundles/grp%2F..%2Fx/r/1/u.tar.gz",
        "bundles/only-one/r/1/u.tar.gz",
        "bundles/grp%2Fsub/r/1/u.zip",
        "reports/grp%2Fsub/r/1/u.tar.gz",
    ],
)
def test_a_key_that_is_no_bundle_key_is_refused_by_name(key):
    with pytest.raises(BadBundle, match=f"object key {key!r} is not a bundle key"):
        parse_bundle_key(key)
