"""Each Lambda function is built with only the adapters its use cases touch, on boto3 clients of
its own (the seam its IAM role is enforced at), and refuses at its cold start to run without a
setting it needs."""

import os
import subprocess
import sys
import threading
import uuid
from dataclasses import replace

import pytest

from codspeed_aggregator import sweeper_wiring, wiring
from codspeed_aggregator.adapters import aws
from codspeed_aggregator.settings import MissingSetting, Settings
from codspeed_aggregator.sweeper_wiring import SWEEPER
from codspeed_aggregator.use_cases.sweep_deadlines import SweepDeadlines
from codspeed_local.lambda_context import LocalContext


def test_each_function_builds_only_what_its_use_cases_touch(stack):
    api, arrivals, finalizer, sweeper = (
        wiring.for_api(),
        wiring.for_arrivals(),
        wiring.for_finalizer(),
        sweeper_wiring.for_sweeper(),
    )
    assert api.store and api.queue and api.upstream is None and api.page_key
    assert arrivals.store and arrivals.queue and arrivals.upstream is None and arrivals.page_key
    assert finalizer.store and finalizer.queue and finalizer.upstream and finalizer.page_key
    assert isinstance(sweeper, SweepDeadlines) and sweeper.queue.sqs is aws.client("sqs", SWEEPER)
    assert wiring.for_api() is api and sweeper_wiring.for_sweeper() is sweeper  # once per process


def test_the_sweeper_loads_none_of_the_bucket_s_the_upstream_s_or_github_s_code():
    """Its cold start imports its one use case, on the table and the queue: not isal (the bundles'
    inflater), requests (the upstream, GitHub), jwt or cryptography (CI tokens), nor any other use case."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, codspeed_aggregator.handlers.sweeper; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {"isal", "requests", "jwt", "cryptography"}, tops
    ours = {m for m in loaded if m.startswith("codspeed_aggregator.use_cases.")}
    assert ours == {"codspeed_aggregator.use_cases.sweep_deadlines"}
    assert "codspeed_aggregator.wiring" not in loaded


def test_pull_request_comments_are_built_where_reports_are_published_only_when_asked_for(stack):
    config = Settings.from_env()
    assert wiring.build(wiring.ARRIVALS, config).reports.comments is None  # off by default
    asked = replace(config, pr_comments=True, github_token="gh-token")
    for name in (wiring.API, wiring.ARRIVALS, wiring.FINALIZER):
        comments = wiring.build(name, asked).reports.comments
        assert (
            comments.hosts["GITHUB"].http.headers["Authorization"] == "Bearer gh-token" and comments.quiet_seconds == 30
        )
        assert "GITLAB" not in comments.hosts  # GitLab's notes only where the stack knows GitLab's API
    on_gitlab = replace(asked, gitlab_api_url="https://gitlab.example.com/api/v4", gitlab_token="gl-token")
    notes = wiring.build(wiring.ARRIVALS, on_gitlab).reports.comments.hosts["GITLAB"]
    assert (notes.api_url, notes.http.headers["PRIVATE-TOKEN"]) == ("https://gitlab.example.com/api/v4", "gl-token")


def test_a_new_functions_session_reads_no_botocore_file_the_process_has_read(stack, monkeypatch):
    """Each function's session has credentials of its own, and botocore's models and endpoints are
    read once a process: each session read its own (a second of each local stack's start)."""
    from botocore.loaders import JSONFileLoader

    aws.client("dynamodb", "first-function")  # the process has read what a DynamoDB client needs
    read, load = [], JSONFileLoader.load_file
    monkeypatch.setattr(JSONFileLoader, "load_file", lambda self, path: read.append(path) or load(self, path))
    names = [f"function-{n}-{uuid.uuid4().hex[:8]}" for n in range(2)]
    clients = [aws.client("dynamodb", name) for name in names]
    assert read == []
    assert aws.session(names[0]) is not aws.session(names[1]) and clients[0] is not clients[1]
    paths = aws.session(names[0])._loader.search_paths
    assert len(paths) == len(set(paths))  # boto3's own folder once, however many sessions


def test_each_function_calls_aws_with_clients_of_its_own(stack):
    built = {name: wiring.for_function(name) for name in (wiring.API, wiring.ARRIVALS, wiring.FINALIZER)}
    tables = {name: agg.ledger.db for name, agg in built.items()} | {SWEEPER: sweeper_wiring.for_sweeper().runs.db}
    built[SWEEPER] = sweeper_wiring.for_sweeper()
    assert len({id(db) for db in tables.values()}) == 4
    assert all(db is aws.client("dynamodb", name) for name, db in tables.items())
    assert built[wiring.API].store.s3 is aws.client("s3", wiring.API) is not built[wiring.FINALIZER].store.s3
    assert aws.session(wiring.API) is not aws.session(SWEEPER)

    from codspeed_aggregator.handlers import sweeper

    seen = {name: [] for name in built}
    here = threading.get_ident()  # the invocation's own calls: the stack's pollers work on beside it

    def note(model, _n, **_):
        if threading.get_ident() == here:
            seen[_n].append(model.name)

    for name in built:
        aws.client("dynamodb", name).meta.events.register(
            "before-call.dynamodb.*", lambda model, _n=name, **kw: note(model, _n, **kw), unique_id=f"seen-{name}"
        )
    try:
        sweeper.handler({"source": "aws.events"}, LocalContext("codspeed-sweeper"))
    finally:
        for name in built:
            aws.client("dynamodb", name).meta.events.unregister("before-call.dynamodb.*", unique_id=f"seen-{name}")
    assert seen[SWEEPER] == ["Query", "Query"]  # the open-runs index: runs past their deadline, stalled ones
    assert not seen[wiring.API] and not seen[wiring.ARRIVALS] and not seen[wiring.FINALIZER]


@pytest.mark.parametrize(
    "unset, function, says",
    [
        (["table_name"], SWEEPER, "TABLE_NAME is not set: the sweeper function needs it"),
        (["bucket_name"], wiring.API, "BUCKET_NAME is not set: the api function needs it"),
        (["bucket_name"], wiring.ARRIVALS, "BUCKET_NAME is not set: the arrivals function needs it"),
        (
            ["upstream_url", "finalize_queue_url"],
            wiring.FINALIZER,
            "FINALIZE_QUEUE_URL and UPSTREAM_URL are not set: the finalizer function needs them",
        ),
    ],
)
def test_a_function_missing_a_setting_is_refused_naming_the_variable_before_any_client(stack, unset, function, says):
    config = replace(Settings.from_env(), **{name: "" for name in unset})
    clients = aws._client.cache_info().currsize
    with pytest.raises(MissingSetting) as refused:
        sweeper_wiring.build(config) if function == SWEEPER else wiring.build(function, config)
    assert str(refused.value).startswith(says) and "template.yaml" in str(refused.value)
    assert aws._client.cache_info().currsize == clients  # nothing was built before the refusal


def test_a_setting_one_function_needs_does_not_stop_another(stack):
    config = replace(Settings.from_env(), bucket_name="", upstream_url="")
    sweeper = sweeper_wiring.build(config)  # the sweeper reads no bucket and sends nothing upstream
    assert isinstance(sweeper.sweep(), list)
    assert wiring.build(wiring.OPERATOR, replace(config, finalize_queue_url="")).project_tokens


def test_a_handler_missing_a_setting_fails_its_cold_start_with_that_sentence(stack):
    environment = {k: v for k, v in os.environ.items() if k != "FINALIZE_QUEUE_URL"}
    cold_start = (
        "from codspeed_aggregator.handlers import sweeper\n"
        "from codspeed_local.lambda_context import LocalContext\n"
        "sweeper.handler({'source': 'aws.events'}, LocalContext('codspeed-sweeper'))\n"
    )
    failed = subprocess.run(
        [sys.executable, "-c", cold_start], env=environment, capture_output=True, text=True, timeout=60
    )
    assert failed.returncode == 1
    assert (
        "MissingSetting: FINALIZE_QUEUE_URL is not set: the sweeper function needs it"
        in failed.stderr.strip().splitlines()[-1]
    ), failed.stderr[-2000:]


def test_a_use_case_asked_of_a_function_built_without_what_it_needs_says_so(stack):
    config = replace(Settings.from_env(), bucket_name="", upstream_url="")
    operator = wiring.build(wiring.OPERATOR, config)
    with pytest.raises(RuntimeError, match=r"^this function was built without the bucket: see wiring._NEEDS$"):
        operator.record_arrival  # noqa: B018 -- built on access: the access is the test
    assert operator.store is None and operator.project_tokens  # what it has still works
