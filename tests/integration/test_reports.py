"""Publishing reports: never backwards, whoever publishes. Against moto's server (real HTTP, real boto3, real presigned URLs), driven step by step."""

import threading
from concurrent.futures import ThreadPoolExecutor



from tests.factories import bundle, push


def test_an_older_report_never_replaces_a_newer_one(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    current = agg.reports.report(project, run_id)
    stale = current.model_copy(update={"version": current.version - 1, "arrived": 0}).model_dump_json()
    agg.store.publish_report(project, run_id, current.version - 1, stale, "stale")
    assert agg.reports.report(project, run_id) == current
    assert not agg.store.publish_report(project, run_id, current.version, stale, "same version, second writer")
    assert agg.reports.report(project, run_id) == current


def test_concurrent_publishers_leave_the_newest_version(isolated, project, run_id):
    agg = isolated.aggregator
    agg.arrivals.record(push(agg, project, run_id, "1", bundle(), total=2)["key"])
    base = agg.reports.report(project, run_id)
    versions = list(range(base.version + 1, base.version + 21))
    __import__("random").Random(3).shuffle(versions)
    bodies = {v: base.model_copy(update={"version": v}).model_dump_json() for v in versions}
    start = threading.Barrier(len(versions))

    def publish(version):
        start.wait()
        agg.store.publish_report(project, run_id, version, bodies[version], "md")

    with ThreadPoolExecutor(len(versions)) as pool:
        list(pool.map(publish, versions))
    assert agg.reports.report(project, run_id).version == max(versions)
