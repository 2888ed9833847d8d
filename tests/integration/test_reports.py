"""Publishing reports: never backwards, whoever publishes, and never half. Against moto's server
(real HTTP, real boto3, real presigned URLs), driven step by step."""

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from unittest import mock
from urllib.parse import unquote, urlsplit

import pytest
from botocore.exceptions import ClientError

from codspeed_aggregator.adapters.github_status import GitHubStatuses
from codspeed_aggregator.domain.keys import digest_key, known_key, report_key
from codspeed_aggregator.services import run_snapshots
from tests.factories import bundle, push
from tests.fake_github import FakeGitHub
from tests.faults import AWS_FAULTS


def test_an_older_report_never_replaces_a_newer_one(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    current = agg.reports.report(project, run_id)
    stale = current.model_copy(update={"version": current.version - 1, "arrived": 0}).model_dump_json()
    agg.store.publish_report(project, run_id, current.version - 1, stale)
    assert agg.reports.report(project, run_id) == current
    assert not agg.store.publish_report(project, run_id, current.version, stale)  # a second writer of it
    assert agg.reports.report(project, run_id) == current


def test_concurrent_publishers_leave_the_newest_version(isolated, project, run_id):
    agg = isolated.aggregator
    agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    base = agg.reports.report(project, run_id)
    versions = list(range(base.version + 1, base.version + 21))
    __import__("random").Random(3).shuffle(versions)
    bodies = {v: base.model_copy(update={"version": v}).model_dump_json() for v in versions}
    start = threading.Barrier(len(versions))

    def publish(version):
        start.wait()
        agg.store.publish_report(project, run_id, version, bodies[version])

    with ThreadPoolExecutor(len(versions)) as pool:
        list(pool.map(publish, versions))
    assert agg.reports.report(project, run_id).version == max(versions)


@contextmanager
def refused_puts(agg, suffix: str):
    """S3 answers AccessDenied to every PutObject of a key ending with ``suffix`` (a regular expression);
    the keys refused."""
    refused = []

    def answer(request, **_):
        if re.search(f"{suffix}$", unquote(urlsplit(request.url).path)):
            refused.append(unquote(urlsplit(request.url).path))
            return AWS_FAULTS["access denied"]("s3")
        return None

    clients = {id(c): c for c in (agg.store.s3, agg.results.s3)}.values()
    for made in clients:
        made.meta.events.register_first("before-send.s3.PutObject", answer, unique_id="refused-puts")
    try:
        yield refused
    finally:
        for made in clients:
            made.meta.events.unregister("before-send.s3.PutObject", unique_id="refused-puts")


def _objects(agg, project, run_id) -> dict[str, str]:
    prefix = digest_key(project, run_id).rsplit("/", 1)[0] + "/"
    listed = agg.store.s3.list_objects_v2(Bucket=agg.store.bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: o["ETag"] for o in listed}


def test_a_report_whose_publish_was_refused_is_published_when_the_arrival_comes_again(isolated, project, run_id):
    agg = isolated.aggregator
    assert agg.record_arrival.record(push(agg, project, run_id, "1", bundle(), total=3)["key"]) == "recorded"
    published = agg.reports.report(project, run_id)
    key = push(agg, project, run_id, "2", bundle(4502), total=3)["key"]
    with refused_puts(agg, r"/reports/.*[0-9]{10}\.json") as refused, pytest.raises(ClientError, match="AccessDenied"):
        agg.record_arrival.record(key)
    assert refused and agg.reports.report(project, run_id) == published
    assert agg.record_arrival.record(key) == "duplicate"  # SQS delivers it again: counted once, published now
    report = agg.reports.report(project, run_id)
    assert report.arrived == 2 and report.version > published.version
    assert report_key(project, run_id, report.version) in _objects(agg, project, run_id)
    assert not any(k.endswith(".md") for k in _objects(agg, project, run_id))  # one object a publish: its JSON


@pytest.mark.parametrize("which", ["summaries.json.gz", "ledger.json.gz"])
@pytest.mark.slow
def test_a_digest_refused_leaves_the_report_published_and_its_status_posted(isolated, project, run_id, which, caplog):
    github = FakeGitHub()
    try:
        agg = replace(isolated.aggregator, statuses=GitHubStatuses(github.url, "gh-token"))
        keys = [push(agg, project, run_id, str(i), bundle(4600 + i), total=20)["key"] for i in range(1, 19)]
        for key in keys[:17]:
            assert agg.record_arrival.record(key) == "recorded"
        left = _objects(agg, project, run_id)
        assert {digest_key(project, run_id), known_key(project, run_id)} <= set(left)  # over 16 shards: both left
        with (
            refused_puts(agg, which) as refused,
            caplog.at_level(logging.WARNING),
            mock.patch.object(run_snapshots, "KNOWN_EVERY", 1),
        ):
            assert agg.record_arrival.record(keys[17]) == "recorded"
        assert refused and f"digests of {project} {run_id} not left" in caplog.text and "AccessDenied" in caplog.text
        report = agg.reports.report(project, run_id)
        assert report.arrived == 18 and github.statuses[-1]["description"] == "18/20 shards in"
        now = _objects(agg, project, run_id)
        refused_key = next(k for k in left if k.endswith(which))
        assert now[refused_key] == left[refused_key]  # the refused one as it was: a process new to the run
        assert report_key(project, run_id, report.version) in now  # reads the changes since it
    finally:
        github.stop()


def test_a_run_gone_before_its_report_is_rebuilt_publishes_nothing_and_fails_nothing(isolated, project, run_id):
    agg = isolated.aggregator
    agg.reports.publish(project, run_id)  # its records expired meanwhile: there is nothing to show (it raised before)
    assert agg.store.read_report(project, run_id) is None


def test_a_benchmark_two_shards_measured_counts_once_in_every_headline_and_the_worst_list_names_both(
    isolated, project, run_id
):
    """The case seen: three benchmarks at +12% held by the linter and codegen shards read "6
    regressions (worst +12.0%), 3 improvements" in the CLI, the page, the comment and the summary."""
    from codspeed_aggregator.pages.run_page import render_run
    from codspeed_rules.summary import counts_line
    from codspeed_wire.markdown import render_markdown

    agg = isolated.aggregator
    same = [f"tests/t.py::same_{i}" for i in range(3)]
    main = f"main-{run_id}"
    for pid, shard, names in ((11, "linter", [*same, "tests/t.py::lint"]), (12, "codegen", ["tests/t.py::gen"])):
        agg.record_arrival.record(
            push(
                agg,
                project,
                main,
                shard,
                bundle(pid, names, costs=dict.fromkeys(names, 1000)),
                expect=["codegen", "linter"],
            )["key"]
        )
    assert isolated.finalize_all(project, main, agg) == "forwarded"
    pr = {"ref": "refs/pull/5/merge", "baseRef": "main"}
    slower = dict.fromkeys(same, 1120)
    for pid, shard, costs in (
        (21, "linter", {**slower, "tests/t.py::lint": 800}),
        (22, "codegen", {**slower, "tests/t.py::gen": 800}),
    ):
        agg.record_arrival.record(
            push(
                agg, project, run_id, shard, bundle(pid, list(costs), costs=costs), expect=["codegen", "linter"], **pr
            )["key"]
        )
    assert isolated.finalize_all(project, run_id, agg) == "forwarded"

    report = agg.reports.report(project, run_id)
    assert report.overlaps_total == 3  # still told: the shards' filters meet
    said = counts_line(report.counts.model_dump())
    assert said == "3 regressions (worst +12.0%), 2 improvements, 0 unchanged", said
    assert report.counts.measured == 5
    regressed = [b for b in report.benchmarks if b.flag == "regression"]
    assert [(b.name, b.shards) for b in regressed] == [(name, ["codegen", "linter"]) for name in same]
    markdown = render_markdown(report)
    assert "3 regressions (worst +12.0%)" in markdown and "6 regressions" not in markdown
    assert "| codegen, linter |" in markdown
    page = render_run(report, {}, None, None)
    assert page.count(">tests/t.py::same_0<") == 1 and "codegen, linter" in page
