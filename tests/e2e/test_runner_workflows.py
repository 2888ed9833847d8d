"""End to end: CodSpeed workflows as they are really shaped and re-run, through the drop-in
``POST /upload`` (the runner's exact requests, tests/runner.py): jobs of several shapes in one
workflow run, walltime beside valgrind, matrices in sequence and interleaved, re-runs of failed
jobs and of all jobs, GitLab parallel jobs in subgroups, a fork's tokenless pull request.

Each checks, through the CodSpeed-like stand-in (it combines parts by runId, the last upload of a
runPartId wins), that every upload is accepted, every benchmark stands once in its run, and each
shard's identity is in the metadata (and tests/e2e/conftest.py checks the first two after every
end-to-end test)."""

import json
import uuid

import pytest
import requests

from codspeed_local.upstream_stub import archive_of, benchmarks_in
from tests import runner
from tests.conftest import TOKEN, TOKENLESS_PROJECT
from tests.factories import bundle, footprint, put, upload_request, wait_for

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
FINAL = ("forwarded", "forward_failed", "closed_empty")


@pytest.fixture
def workflow():
    return Workflow(str(8_000_000_000 + uuid.uuid4().int % 1_000_000_000), "acme", f"flow-{uuid.uuid4().hex[:8]}")


class Workflow:
    """One GitHub Actions workflow run whose jobs run CodSpeed's runner pointed at the stack."""

    def __init__(self, run_id: str, owner: str, repository: str) -> None:
        self.run_id, self.owner, self.repository = run_id, owner, repository
        self.project = f"{owner}/{repository}"
        self.pid = 5000

    def job(  # noqa: PLR0913 -- each field of a runner job's upload, a keyword
        self,
        stack,
        job: str,
        benchmarks: list[str],
        *,
        executor: str = "valgrind",
        shard: int | None = None,
        total: int | None = None,
        run_index: int = 0,
        token: str | None = TOKEN,
        **meta,
    ) -> runner.Upload:
        self.pid += 1
        if executor == "valgrind":
            archive = runner.folder_archive(runner.valgrind_folder(self.pid, benchmarks), gzipped=True)
        else:
            archive = runner.folder_archive(runner.walltime_folder(self.pid, benchmarks[0]), gzipped=False)
        strategy = dict(matrix={"shard": shard}, job_index=shard - 1, job_total=total) if shard else {}
        part = runner.github_run_part(self.run_id, job, executor, run_index=run_index, **strategy)
        metadata = runner.metadata(
            archive,
            executor=executor,
            owner=self.owner,
            repository=self.repository,
            commit=COMMIT,
            run_part=part,
            **meta,
        )
        sent = runner.upload(stack.api_url, runner.Upload(metadata, archive, token=token))
        assert sent.post.status_code == 200, sent.post.text  # the runner fails its job on anything else
        assert sent.put.status_code == 200, sent.put.text
        return sent

    def report(self, stack, run_id: str | None = None) -> dict:
        answer = requests.get(
            f"{stack.api_url}/v1/runs/{self.project}/{run_id or self.run_id}",
            headers={"Authorization": TOKEN},
            timeout=10,
        )
        return answer.json() if answer.status_code == 200 else {}

    def final(self, stack, run_id: str | None = None) -> dict:
        return wait_for(lambda: (r := self.report(stack, run_id)).get("state") in FINAL and r, timeout=60)

    def upstream(self, stack) -> dict[str, tuple[dict, set[str]]]:
        """The run as CodSpeed holds it: runPartId -> (its metadata, its benchmarks)."""
        [parts] = [
            p
            for (project, run), p in stack.upstream.combined().items()
            if project == self.project and run == self.run_id
        ] or [{}]
        return {
            part: (json.loads((u / "metadata.json").read_text()), benchmarks_in(archive_of(u)))
            for part, u in parts.items()
        }


def _benchmarks(held: dict) -> list[str]:
    return sorted(b for _, found in held.values() for b in found)


@pytest.mark.parametrize("plain_first", [True, False], ids=["plain-then-matrix", "matrix-then-plain"])
@pytest.mark.slow
def test_a_plain_job_and_a_matrix_are_two_groups_each_forwarded_as_its_own_part(stack, workflow, plain_first):
    def plain():
        workflow.job(stack, "lint-bench", ["lint::a"])  # a plain job: a group of one, complete at once
        assert workflow.final(stack)["state"] == "forwarded"

    def matrix():
        for shard in (1, 2):
            workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=2)
        assert workflow.final(stack)["state"] == "forwarded"

    for group in (plain, matrix) if plain_first else (matrix, plain):
        group()
    report = workflow.final(stack)  # the run's report is its latest attempt's
    assert report["run_id"] == f"{workflow.run_id}~2" and report["state"] == "forwarded" and report["expected"] == 3
    held = workflow.upstream(stack)
    assert _benchmarks(held) == ["bench::s1", "bench::s2", "lint::a"]  # each once
    assert sorted(held) == [
        'bench-{"aggregated-part":1,"executor":"valgrind"}',
        'lint-bench-{"executor":"valgrind","run-index":0}',
    ]
    assert len(stack.upstream.uploads(workflow.run_id)) == 2  # the group forwarded first was not sent again


@pytest.mark.slow
def test_interleaved_matrices_of_three_and_two_are_refused_nothing_and_forwarded_once(stack, workflow):
    order = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]
    for job, shard in order:
        workflow.job(stack, job, [f"{job}::s{shard}"], shard=shard, total=3 if job == "a" else 2)
    report = workflow.final(stack)
    assert report["state"] == "forwarded" and report["arrived"] == report["expected"] == 5
    held = workflow.upstream(stack)
    assert sorted(held) == [
        'a-{"aggregated-part":1,"executor":"valgrind"}',
        'b-{"aggregated-part":1,"executor":"valgrind"}',
    ]
    assert {part: sorted(found) for part, (_, found) in held.items()} == {
        'a-{"aggregated-part":1,"executor":"valgrind"}': ["a::s1", "a::s2", "a::s3"],
        'b-{"aggregated-part":1,"executor":"valgrind"}': ["b::s1", "b::s2"],
    }
    meta, _ = held['a-{"aggregated-part":1,"executor":"valgrind"}']
    shards = meta["runPart"]["metadata"]["aggregatedShards"]
    assert [s["metadata"]["job-index"] for s in shards] == [0, 1, 2]  # each shard's identity kept
    assert {s["executor"] for s in shards} == {"valgrind"} and all(s["system"]["host"] == "runnervm1" for s in shards)
    assert all(s["runPartId"].startswith('a-{"shard":') and s["ci"]["ghData"]["job"] == "a" for s in shards)
    assert meta["runPart"]["metadata"]["runnerOf"] in {s["shard"] for s in shards}
    assert (
        list(meta)[:8]
        == list(runner.metadata(b"", executor="valgrind", owner="o", repository="r", commit=COMMIT, run_part=None))[:8]
    )  # the runner's field order


@pytest.mark.slow
def test_a_walltime_job_beside_a_valgrind_matrix_keeps_both_executors(stack, workflow):
    workflow.job(stack, "walltime-bench", ["wall::w"], executor="walltime", run_index=0)
    for shard in (1, 2):
        workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=2)
    assert workflow.final(stack)["state"] == "forwarded"
    held = workflow.upstream(stack)
    executors = {part: meta["runner"]["executor"] for part, (meta, _) in held.items()}
    assert executors == {
        'walltime-bench-{"executor":"walltime","run-index":0}': "walltime",
        'bench-{"aggregated-part":1,"executor":"valgrind"}': "valgrind",
    }
    assert _benchmarks(held) == ["bench::s1", "bench::s2", "wall::w"]


@pytest.mark.parametrize("rerun", [[2], [1, 2]], ids=["failed-jobs", "all-jobs"])
@pytest.mark.slow
def test_a_re_run_replaces_its_part_upstream_under_the_same_run_part_id(stack, workflow, rerun):
    for shard in (1, 2):
        workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=2)
    assert workflow.final(stack)["state"] == "forwarded"
    for shard in rerun:  # "Re-run failed jobs" or "Re-run all jobs": same run id, same runPartIds
        again = workflow.job(stack, "bench", [f"bench::s{shard}-again"], shard=shard, total=2)
        assert again.post.json()["runId"] == f"{workflow.run_id}~2"  # one attempt for the re-run's jobs
    if rerun == [2]:  # what it inherited never completes it: its close does (the re-run's gate, the webhook)
        assert workflow.report(stack)["state"] == "open"
        closed = requests.post(
            f"{stack.api_url}/v1/runs/close",
            headers={"Authorization": TOKEN},
            timeout=10,
            json={"project": workflow.project, "run_id": workflow.run_id},
        )
        assert closed.status_code == 202, closed.text
    last = wait_for(
        lambda: (
            (r := workflow.report(stack)).get("state") == "forwarded"
            and r["shards"]
            and all(s["state"] == "arrived" for s in r["shards"])
            and _benchmarks(workflow.upstream(stack))
            == sorted(f"bench::s{n}" + ("-again" if n in rerun else "") for n in (1, 2))
            and r
        ),
        timeout=60,
    )
    assert last["attempt"] == 2
    held = workflow.upstream(stack)
    assert list(held) == [
        'bench-{"aggregated-part":1,"executor":"valgrind"}'
    ]  # one part, replaced in place by each attempt
    assert len(stack.upstream.uploads(workflow.run_id)) == last["attempt"]


@pytest.mark.slow
def test_an_attempt_can_be_closed_followed_and_named_and_its_skips_go_with_it(stack, workflow, tmp_path):
    from tests.e2e.test_sharded_run import _run as client

    for shard in (1, 2):
        workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=3)
    workflow.job(stack, "bench", ["bench::s3"], shard=3, total=3)
    assert workflow.final(stack)["state"] == "forwarded"
    workflow.job(stack, "bench", ["bench::s2b"], shard=2, total=3)  # a re-run of job 2: attempt 2, closed
    assert client(stack, "close", "--project", workflow.project, "--run-id", workflow.run_id).returncode == 0
    assert workflow.final(stack)["run_id"] == f"{workflow.run_id}~2"
    late = workflow.job(stack, "extra", ["extra::x"], shard=1, total=2)  # a group whose second job never comes
    attempt = late.post.json()["runId"]
    assert attempt == f"{workflow.run_id}~3"
    args = ["--project", workflow.project, "--run-id", workflow.run_id]
    closed = client(stack, "close", *args)
    assert closed.returncode == 0 and attempt in closed.stdout, closed.stdout + closed.stderr
    status = client(stack, "status", "--wait", "--timeout", "60", "--format", "json", *args)
    assert json.loads(status.stdout)["run_id"] == attempt and json.loads(status.stdout)["state"] == "forwarded"
    named = client(
        stack, "status", "--format", "json", "--project", workflow.project, "--run-id", f"{workflow.run_id}~1"
    )
    assert json.loads(named.stdout)["run_id"] == workflow.run_id and json.loads(named.stdout)["attempt"] == 1
    for bad, says in [(f"{workflow.run_id}~0", "attempt 0"), (f"{workflow.run_id}~", "names no attempt")]:
        refused = client(stack, "status", "--project", workflow.project, "--run-id", bad)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    past = requests.get(
        f"{stack.api_url}/v1/runs/{workflow.project}/{workflow.run_id}~9999",
        headers={"Authorization": TOKEN},
        timeout=10,
    )
    assert past.status_code == 422 and "at most 51 attempts" in past.json()["error"]
    assert _benchmarks(workflow.upstream(stack)) == ["bench::s1", "bench::s2b", "bench::s3", "extra::x"]


def test_a_skip_in_the_runner_route_must_name_a_shard_the_run_can_hold(stack, workflow):
    for shard in (1, 2):
        workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=3)
    before = wait_for(lambda: (r := workflow.report(stack)).get("arrived") == 2 and r)
    refused = requests.post(
        f"{stack.api_url}/v1/runs/close",
        headers={"Authorization": TOKEN},
        timeout=10,
        json={"project": workflow.project, "run_id": workflow.run_id, "skip": ["9"]},
    )
    assert refused.status_code == 422 and refused.json()["error"].startswith(
        "cannot skip 9: not among the shards of this run or of its baseline run"
    )
    after = workflow.report(stack)
    assert (after["state"], after["version"], len(after["shards"]), after["expected"]) == (
        "open",
        before["version"],
        3,
        3,
    )
    assert [(s["name"], s["state"], s["display"]) for s in after["shards"]][-1] == (
        "job:bench",
        "expected",
        "bench: 1 of 3 to come",
    )
    for shard in before["shards"]:
        if shard["state"] == "arrived":
            assert shard["label"].startswith('bench-{"shard":') and shard["display"].startswith("bench [shard ")


@pytest.mark.slow
def test_a_shard_main_skipped_can_be_skipped_again_and_is_carried_from_the_run_that_ran_it(stack, workflow):
    """Main ran shard 3, then skipped it (carried); a pull request skips it too: its baseline (main's
    latest) never saw shard 3 but skipped it, so the skip is one the run can hold."""
    for shard in (1, 2, 3):
        workflow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=3)
    ran = workflow.final(stack)
    [third] = [s["name"] for s in ran["shards"] if '"shard":3' in (s["label"] or "")]
    skipping = Workflow(str(int(workflow.run_id) + 1), workflow.owner, workflow.repository)
    pull = Workflow(str(int(workflow.run_id) + 2), workflow.owner, workflow.repository)
    for flow, meta in (
        (skipping, {}),
        (pull, {"event": "pull_request", "ref": "refs/pull/9/merge", "base_ref": "main"}),
    ):
        for shard in (1, 2):
            flow.job(stack, "bench", [f"bench::s{shard}"], shard=shard, total=3, **meta)
        wait_for(lambda f=flow: f.report(stack).get("arrived") == 2)
        closed = requests.post(
            f"{stack.api_url}/v1/runs/close",
            headers={"Authorization": TOKEN},
            timeout=10,
            json={"project": flow.project, "run_id": flow.run_id, "skip": [third]},
        )
        assert closed.status_code == 202, closed.text
        report = flow.final(stack)
        carried = {s["name"]: s for s in report["shards"]}[third]
        assert (report["state"], carried["state"], carried["source"]["run_id"]) == (
            "forwarded",
            "carried",
            workflow.run_id,
        )
        assert not [s for s in report["shards"] if s["state"] == "missing"]  # the job carried is no job missing


@pytest.mark.slow
def test_gitlab_parallel_jobs_in_a_subgroup_and_a_plain_job_are_groups_of_one_pipeline(stack):
    group, repository = "platform/perf", f"engine-{uuid.uuid4().hex[:6]}"
    project, accepted, pid = f"{group}/{repository}", [], 6000
    jobs = [("bench 1/2", "bench::g1"), ("lint", "lint::g"), ("bench 2/2", "bench::g2")]
    for number, (name, benchmark) in enumerate(jobs, start=1):
        pid += 1
        archive = runner.folder_archive(runner.valgrind_folder(pid, [benchmark]), gzipped=True)
        job_id = str(990_000 + number + uuid.uuid4().int % 1000 * 10)
        meta = runner.gitlab_metadata(
            archive, job_id, name, owner=group, repository=repository, commit=COMMIT, ref="refs/heads/main"
        )
        sent = runner.upload(stack.api_url, runner.Upload(meta, archive, token=TOKEN))
        assert sent.post.status_code == 200 and sent.put.status_code == 200, sent.post.text
        accepted.append(sent)
    run_id = accepted[-1].post.json()["runId"].split("~")[0]

    def answer() -> dict:
        return requests.get(
            f"{stack.api_url}/v1/runs/{project}/{run_id}", headers={"Authorization": TOKEN}, timeout=10
        ).json()

    report = wait_for(lambda: (r := answer()).get("state") == "forwarded" and r.get("arrived") == 3 and r, timeout=60)
    assert report["expected"] == 3
    parts = [
        u
        for u in stack.upstream.uploads()
        if json.loads((u / "metadata.json").read_text())["owner"] == group
        and json.loads((u / "metadata.json").read_text())["repository"] == repository
    ]
    metas = [json.loads((u / "metadata.json").read_text()) for u in parts]
    found = sorted(b for u in parts for b in benchmarks_in(archive_of(u)))
    assert found == ["bench::g1", "bench::g2", "lint::g"]  # each once, whatever runId each part names
    [merged] = [m for m in metas if m["runPart"]["runPartId"].startswith("bench-")]
    ids = [
        (s["ci"]["glData"]["runId"], s["ci"]["glData"]["job"])
        for s in merged["runPart"]["metadata"]["aggregatedShards"]
    ]
    assert ids == [
        (accepted[0].metadata["glData"]["runId"], "bench 1/2"),
        (accepted[2].metadata["glData"]["runId"], "bench 2/2"),
    ]


def test_a_forks_tokenless_pull_request_is_forwarded_without_authorization(stack):
    owner, repository = TOKENLESS_PROJECT.split("/")
    flow = Workflow(str(8_500_000_000 + uuid.uuid4().int % 1_000_000), owner, repository)
    for shard in (1, 2):
        flow.job(
            stack,
            "bench",
            [f"fork::s{shard}-{flow.run_id}"],
            shard=shard,
            total=2,
            token=None,
            tokenless=True,
            event="pull_request",
            ref="refs/pull/9/merge",
            base_ref="main",
        )
    assert flow.final(stack)["state"] == "forwarded"
    [upload] = stack.upstream.uploads(flow.run_id)
    headers = {k.lower() for k in json.loads((upload / "post-headers.json").read_text())}
    assert "authorization" not in headers and json.loads((upload / "metadata.json").read_text())["tokenless"] is True
    assert json.loads((upload / "post-headers.json").read_text())["User-Agent"].startswith("codspeed-shard-aggregator/")


def test_a_project_with_its_own_upstream_token_in_ssm_is_forwarded_with_it(stack, workflow):
    from codspeed_aggregator.adapters import aws
    from codspeed_local.stack import UPSTREAM_TOKENS_PATH

    aws.client("ssm").put_parameter(
        Name=f"{UPSTREAM_TOKENS_PATH}/{workflow.project}", Value="its-own-token", Type="SecureString"
    )
    stack.upstream.project_tokens[workflow.project] = "its-own-token"  # the stack's single token is refused now
    for shard in (1, 2):
        workflow.job(stack, "bench", [f"own::s{shard}"], shard=shard, total=2)
    assert workflow.final(stack)["state"] == "forwarded"  # read by the finalizer under its role's grant
    [upload] = stack.upstream.uploads(workflow.run_id)
    assert json.loads((upload / "post-headers.json").read_text())["Authorization"] == "its-own-token"


def _push(stack, workflow: Workflow, shard: str, benchmark: str, **manifest) -> None:
    """A client's push into the workflow's run, as ``codspeed-client push`` asks and PUTs."""
    data = bundle(4242, [benchmark])
    request = upload_request(workflow.project, workflow.run_id, shard, data, commit=COMMIT, **manifest)
    answer = requests.post(f"{stack.api_url}/v1/uploads", json=request, headers={"Authorization": TOKEN}, timeout=10)
    assert answer.status_code == 201, answer.text
    put(answer.json(), data)


@pytest.mark.slow
def test_a_job_named_like_the_aggregators_own_keeps_its_part_beside_the_pushed_shards_part(stack, workflow):
    """A matrix job called ``codspeed-shard-aggregator`` and two pushed shards in one run: two merged
    parts under two runPartIds, every benchmark upstream (it was 2 of 4: one part replaced the other)."""
    for shard in (1, 2):
        workflow.job(stack, "codspeed-shard-aggregator", [f"job::s{shard}"], shard=shard, total=2)
        _push(stack, workflow, str(shard), f"pushed::s{shard}", total=2)
    report = workflow.final(stack)
    assert report["state"] == "forwarded" and report["arrived"] == 4, report
    held = workflow.upstream(stack)
    assert sorted(held) == [
        'codspeed-shard-aggregator-{"aggregated-part":1,"executor":"valgrind"}',
        'codspeed-shard-aggregator-{"aggregated-pushed-part":1,"executor":"valgrind"}',
    ]
    assert _benchmarks(held) == ["job::s1", "job::s2", "pushed::s1", "pushed::s2"]


@pytest.mark.slow
def test_a_push_named_like_a_runner_jobs_key_is_a_shard_of_its_own(stack, workflow):
    """A pushed shard spelled exactly like a runner job's key of the layout before (slug ``@`` digest)
    is its own shard: the job keeps its shard and its benchmark (it was lost, and reported missing)."""
    from codspeed_aggregator.domain.drop_in import job_key, safe_key

    label = runner.github_run_part(workflow.run_id, "bench", "valgrind")["runPartId"]
    lookalike = safe_key(label)
    before = footprint(stack, workflow.project, workflow.run_id)
    data = bundle(4242, ["pushed::refused"])
    request = upload_request(workflow.project, workflow.run_id, job_key(label), data, commit=COMMIT)
    refused = requests.post(f"{stack.api_url}/v1/uploads", json=request, headers={"Authorization": TOKEN}, timeout=10)
    assert refused.status_code == 422 and "shard" in refused.text and "pattern" in refused.text, refused.text
    assert footprint(stack, workflow.project, workflow.run_id) == before  # the job's own key cannot be pushed
    _push(stack, workflow, lookalike, "pushed::lookalike", expect=[lookalike])
    workflow.job(stack, "bench", ["job::a"])
    report = workflow.final(stack)
    assert report["state"] == "forwarded" and report["arrived"] == 2 and report["expected"] == 2, report
    assert {s["name"]: s["state"] for s in report["shards"]} == {lookalike: "arrived", job_key(label): "arrived"}
    assert _benchmarks(workflow.upstream(stack)) == ["job::a", "pushed::lookalike"]
