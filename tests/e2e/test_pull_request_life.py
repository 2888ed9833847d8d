"""A pull request's life, through ``codspeed-aggregator local`` in a process of its own, with the
README's workflow run as GitHub runs it (``tests.github_actions.Workflow``): each job with the
environment and event payload GitHub gives it, actions/checkout's merge commit, the CodSpeed
CLI installed as the workflow installs it (a stand-in: the release cannot be downloaded here)
and run on the checkout's benchmarks, and GitHub's ``workflow_run`` webhook at each attempt's end.

main's run is the baseline; main then moves (a minifier change) after the pull request branches.
The pull request changes the linter and the parser: it is opened (its linter job crashes once: "re-run failed
jobs"), pushed to again, and "re-run all jobs" is clicked; a fork's pull request follows."""

import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import requests
import yaml

from codspeed_aggregator.auth import github_webhook_secret, signature
from codspeed_local.upstream_stub import StubUpstream, archive_of, benchmarks_in
from tests.factories import git_commit, wait_for
from tests.fake_github import FakeGitHub
from tests.fake_gitlab import FakeGitLab
from tests.github_actions import OURS, ROOT, Event, Workflow
from tests.gitlab_ci import GitLabCi, Pipeline
from tests.local_process import local_aggregator

pytestmark = pytest.mark.slow  # over 3 s each on a 2-core machine: left out of the quick loop (-m "not slow")

PROJECT, TOKEN, SECRET = "oxc-project/oxc", "pr-life-token", "pr-life-webhook-secret"
GITLAB_PIPELINE = re.findall(
    r"<!-- docs-check: gitlab -->\n```yaml\n(\.client:.*?)```",
    (ROOT / "docs" / "setup" / "gitlab.md").read_text(),
    re.S,
)
ROUTE_1 = re.findall(
    r"<!-- docs-check: workflow-status -->\n```yaml\n(jobs:.*?)```", (ROOT / "README.md").read_text(), re.S
)
README_WORKFLOW = re.findall(
    r"<!-- docs-check: workflow -->\n```yaml\n(on:.*?)```", (ROOT / "README.md").read_text(), re.S
)


@pytest.fixture(scope="module")
def github():
    fake = FakeGitHub()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def gitlab():
    fake = FakeGitLab(token="gl-token")
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def aggregator(tmp_path_factory, github, gitlab, oidc_issuer):
    """``codspeed-aggregator local`` with pull-request comments on, against the fake GitHub and GitLab."""
    upstream = tmp_path_factory.mktemp("upstream")
    env = {
        **os.environ,
        "PR_COMMENTS": "true",
        "COMMENT_SECONDS": "0",
        "GITHUB_API_URL": github.url,
        "TOKENLESS_PROJECTS": PROJECT,
        "GITHUB_TOKEN": "gh-app-token",
        "COMMIT_STATUS": "true",
        "GITLAB_API_URL": gitlab.api_url,
        "GITLAB_TOKEN": "gl-token",
        "OIDC_JWKS_URL": oidc_issuer.jwks_url,  # route 1: each job's GitHub OIDC token
    }
    with local_aggregator(
        "--token", TOKEN, "--upstream-dir", str(upstream), "--webhook-secret", SECRET, env=env
    ) as stack:
        yield stack.api_url, StubUpstream(upstream, None)


INSTALLER = """mkdir -p "$HOME/.cargo/bin"
ln -sf {codspeed} "$HOME/.cargo/bin/codspeed"
echo 'export PATH="$HOME/.cargo/bin:$PATH"' > "$HOME/.cargo/env"
"""
CURL = """#!/bin/bash
# the one download the workflow makes: CodSpeed's runner installer of a released version
case "${{@: -1}}" in
  https://github.com/CodSpeedHQ/runner/releases/download/v[0-9]*/codspeed-runner-installer.sh) cat {installer} ;;
  *) echo "curl: (22) The requested URL returned error: 404" >&2; exit 22 ;;
esac
"""
CODSPEED = """#!{python}
# CodSpeed's runner with --skip-upload: runs the benchmarks of benches/<shard> of the checkout
# (their costs in costs.txt, what the code under test makes them) and leaves their profiles
import os, sys, zlib
from pathlib import Path
from codspeed_local.profiles import make_profile_folder
args = sys.argv[1:]
assert args[0] == "run" and "--skip-upload" in args, args
folder = Path(args[args.index("--profile-folder") + 1])
bench = Path(next(a for a in args[args.index("--") + 1:] if a.startswith("benches/")))
if os.environ.get("BENCHMARKS_CRASH"):
    sys.exit("error: the benchmark process crashed (signal 11)")
listed = (bench / "costs.txt").read_text().splitlines()
costs = {{f"{{bench}}/test_bench.py::{{n}}": int(c) for n, c in (l.split() for l in listed)}}
make_profile_folder(folder, 100 + zlib.crc32(str(bench).encode()) % 30000, sorted(costs), costs=costs)
"""


PIP = """#!/bin/bash
# the one package a job installs: this repository's client (pip's own download cannot reach GitHub here)
wanted="install codspeed-client @ git+https://github.com/acme/codspeed-shard-aggregator#subdirectory=client"
[ "$1 $2" = "$wanted" ] || exit 1
mkdir -p "$HOME/.local/bin" && ln -sf {client} "$HOME/.local/bin/codspeed-client"
"""


def _tools(folder: Path) -> Path:
    """A folder for PATH: curl, pip, and the CodSpeed CLI the installer links as ``codspeed``."""
    folder.mkdir()
    files = {
        "installer.sh": INSTALLER.format(codspeed=folder / "codspeed-cli"),
        "curl": CURL.format(installer=folder / "installer.sh"),
        "codspeed-cli": CODSPEED.format(python=sys.executable),
        "pip": PIP.format(client=Path(sys.executable).parent / "codspeed-client"),
    }
    for name, text in files.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


class Repository:
    """The project's repository (what GitHub holds), mirrored into the fake GitHub's history."""

    def __init__(self, path: Path, github: FakeGitHub) -> None:
        self.path, self.github = path, github
        subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)

    def commit(self, files: dict[str, str], message: str, branch: str = "main") -> str:
        if branch in self.branches() or self.branches():  # a new branch starts where main is
            self.git("checkout", "-q", *(() if branch in self.branches() else ("-b",)), branch)
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        self.git("add", ".")
        sha = git_commit(self.path, message)
        self.github.commit_on(branch, sha, *self.git("log", "-1", "--format=%P", sha).split())
        return sha

    def merge(self, base: str, head: str, number: int) -> str:
        """GitHub's test merge commit of a pull request, ``refs/pull/N/merge``: ``base`` first."""
        self.git("checkout", "-q", "--detach", base)
        self.git(
            "-c",
            "user.email=gh@example.com",
            "-c",
            "user.name=GitHub",
            "merge",
            "-q",
            "--no-ff",
            "-m",
            f"Merge {head} into {base}",
            head,
        )
        sha = self.git("rev-parse", "HEAD")
        self.git("update-ref", f"refs/pull/{number}/merge", sha)
        self.git("checkout", "-q", "main")
        self.github.commits[sha] = [base, head]  # GitHub has the merge commit, and names it the pull request's
        self.github.merge_commits[number] = sha
        return sha

    def branches(self) -> list[str]:
        return self.git("branch", "--format=%(refname:short)").split()

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True
        ).stdout.strip()


def _repository(full_name: str) -> dict:
    """A repository as GitHub's event payloads hold it: its id (what the runner tells a fork by), name, owner."""
    return {"id": zlib.crc32(full_name.encode()), "full_name": full_name, "owner": {"login": full_name.split("/")[0]}}


def _pull_request(action: str, number: int, head: str, base: str, merge: str, fork: str | None = None) -> Event:
    """GitHub's pull_request event as its jobs get it: the payload, GITHUB_SHA the test merge commit."""
    repo = _repository(PROJECT)
    payload = {
        "action": action,
        "number": number,
        "repository": {**repo, "private": False},
        "pull_request": {
            "number": number,
            "head": {"sha": head, "ref": "fix-linter", "repo": _repository(fork) if fork else repo},
            "base": {"sha": base, "ref": "main", "repo": repo},
        },
    }
    return Event("pull_request", payload, merge, f"refs/pull/{number}/merge", "fix-linter", "main")


def _workflow_run_completed(api_url: str, run_id: int, attempt: int, head: str) -> None:
    body = json.dumps(
        {
            "action": "completed",
            "workflow_run": {"id": run_id, "run_attempt": attempt, "head_sha": head},
            "repository": {"full_name": PROJECT},
        }
    ).encode()
    answer = requests.post(
        f"{api_url}/webhooks/github",
        data=body,
        timeout=30,
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": "workflow_run",
            "X-Hub-Signature-256": signature(github_webhook_secret(SECRET, PROJECT), body),
        },
    )
    assert answer.status_code == 200, answer.text


def _steps(job: str) -> list[dict]:
    return [
        step
        for step in yaml.safe_load(README_WORKFLOW[0])["jobs"][job]["steps"]
        if "uses" in step and step["uses"] == OURS or "run" in step
    ]


def _results(jobs) -> dict:
    return {(j.name, *j.matrix.values()): j.result for j in jobs}


def _parts_of(upstream: StubUpstream, run_id: int) -> list[list[str]]:
    """The benchmarks of each upload upstream of the run, in no order (jobs that ran at once)."""
    return sorted(sorted(found) for found in _forwards(upstream, run_id))


def _forwards(upstream: StubUpstream, run_id: int) -> list[set[str]]:
    """The benchmarks of each upload upstream of the run (CodSpeed's runPart.runId: the CI's run), oldest first."""
    return [benchmarks_in(archive_of(upload)) for upload in upstream.uploads(run_id=str(run_id))]


def _states(api_url: str, project: str, run_id: int, attempts: int) -> list[str | None]:
    """The state of the run's first ``attempts`` attempts (None: no such attempt)."""
    answers = [
        requests.get(
            f"{api_url}/v1/runs/{project}/{run_id}{f'~{a}' if a > 1 else ''}",
            headers={"Authorization": TOKEN},
            timeout=30,
        )
        for a in range(1, attempts + 1)
    ]
    return [a.json()["state"] if a.status_code == 200 else None for a in answers]


SHARDS = ("linter", "minifier", "parser")
COSTS = "test_{0}_small 1000\ntest_{0}_large 4000\n"
SLOWER = "test_{0}_small 1300\ntest_{0}_large 5200\n"  # +30%


OXC = {
    ".codspeed/shards.toml": "".join(
        f'[shards.{s}]\npaths = ["crates/oxc_{s}/**", "benches/{s}/**"]\n' for s in SHARDS
    ),
    **{f"benches/{s}/costs.txt": COSTS.format(s) for s in SHARDS},
    **{f"crates/oxc_{s}/src/lib.rs": f"// {s}\n" for s in SHARDS},
}


def benchmarks(*shards: str) -> set[str]:
    return {f"benches/{shard}/test_bench.py::test_{shard}_{size}" for shard in shards for size in ("small", "large")}


def test_a_pull_requests_life_through_the_readme_workflow(aggregator, github, tmp_path):
    api_url, upstream = aggregator
    assert len(README_WORKFLOW) == 1
    repo = Repository(tmp_path / "oxc", github)
    tools = _tools(tmp_path / "tools")
    workflow = Workflow(
        README_WORKFLOW[0],
        PROJECT,
        repo.path,
        tmp_path / "jobs",
        vars={"CODSPEED_AGGREGATOR_URL": api_url},
        secrets={"CODSPEED_AGGREGATOR_TOKEN": TOKEN},
        path=[tools],
        github=github,
    )
    root = repo.commit(OXC, "oxc")

    # main's run: every shard, forwarded as the baseline
    main = workflow.run(
        1001,
        Event(
            "push",
            {"ref": "refs/heads/main", "after": root, "repository": {"full_name": PROJECT}},
            root,
            "refs/heads/main",
        ),
    )
    assert set(_results(main).values()) == {"success"}, [j.said for j in main]

    # the pull request branches from main (a slower linter, a parser change); main then moves under it (the minifier)
    head1 = repo.commit(
        {
            "crates/oxc_linter/src/lib.rs": "// linter, slower\n",
            "benches/linter/costs.txt": SLOWER.format("linter"),
            "crates/oxc_parser/src/lib.rs": "// parser, refactored\n",
        },
        "slower linter",
        "fix-linter",
    )
    moved = repo.commit({"crates/oxc_minifier/src/lib.rs": "// minifier, changed on main\n"}, "main moves")
    github.pulls[7] = ("main", head1)

    # opened: plan runs the linter and the parser; the linter crashes, the gate closes the run with it missing
    opened = _pull_request("opened", 7, head1, moved, repo.merge(moved, head1, 7))
    first = workflow.run(2001, opened, failing=frozenset({("benchmarks", "linter")}))
    plan = next(j for j in first if j.name == "plan")
    assert (plan.outputs["shards"], plan.outputs["expect"]) == ("linter,parser", "linter,parser,minifier"), plan.said
    assert "skips minifier" in plan.said[0]  # main's change is not the pull request's
    assert _results(first) == {
        ("plan",): "success",
        ("benchmarks", "linter"): "failure",
        ("benchmarks", "parser"): "success",
        ("gate",): "failure",
    }
    _workflow_run_completed(api_url, 2001, 1, head1)

    # "re-run failed jobs": the linter leg and the gate again; the plan's outputs and the parser's upload stand
    second = workflow.run(2001, opened, attempt=2, rerun="failed", earlier=first)
    assert _results(second) == {
        ("plan",): "success",
        ("benchmarks", "parser"): "success",
        ("benchmarks", "linter"): "success",
        ("gate",): "failure",
    }
    assert [j.attempt for j in second if j.name == "benchmarks"] == [1, 2]
    gate = next(j for j in second if j.name == "gate")
    assert gate.codes == [0, 13] and "worst benches/linter/test_bench.py::test_linter_" in gate.said[-1], gate.said
    assert "+30.0%" in gate.said[-1]
    _workflow_run_completed(api_url, 2001, 2, head1)

    # a second push to the pull request: the linter is fast again
    head2 = repo.commit({"benches/linter/costs.txt": COSTS.format("linter")}, "faster again", "fix-linter")
    github.pulls[7] = ("main", head2)
    pushed = _pull_request("synchronize", 7, head2, moved, repo.merge(moved, head2, 7))
    third = workflow.run(2002, pushed)
    assert set(_results(third).values()) == {"success"}, [j.said for j in third]
    _workflow_run_completed(api_url, 2002, 1, head2)

    # "re-run all jobs": the same commit and payload, every job again
    fourth = workflow.run(2002, pushed, attempt=2, rerun="all")
    assert set(_results(fourth).values()) == {"success"}, [j.said for j in fourth]
    _workflow_run_completed(api_url, 2002, 2, head2)

    # one aggregator attempt per CI attempt, each forwarded once
    for run_id in (2001, 2002):
        assert _states(api_url, PROJECT, run_id, 3) == ["forwarded", "forwarded", None]
    # each shard its own part as it landed (the parts mode, the default): the parser, then the linter's
    # re-run; the minifier, skipped by the plan, is left to CodSpeed's baseline (nothing of it sent)
    assert _forwards(upstream, 2001) == [benchmarks("parser"), benchmarks("linter")]
    # the second push: the plan skips the minifier again; "re-run all jobs" sends both parts again
    assert _parts_of(upstream, 2002) == sorted([sorted(benchmarks(shard)) for shard in ("linter", "parser")] * 2)
    assert not upstream.benchmarks_twice(PROJECT)

    # one comment on the pull request, showing its newest commit; the earlier run folded
    comments = [c for c in github.comments.values() if c["number"] == 7]
    assert len(comments) == 1, comments
    body = comments[0]["body"]
    assert head2[:12] in body and "1 earlier run of this pull request" in body and "run 2001" in body, body
    statused = {status["path"].rsplit("/", 1)[1] for status in github.statuses}
    assert {head1, head2} <= statused and not statused & {opened.sha, pushed.sha}  # per commit, never a merge commit

    # a fork's pull request: no secrets, so no token. GitHub bears out what its requests claim (an open
    # pull request from a fork, its head, its Actions run): its shard counts, goes upstream without a
    # token as CodSpeed's runner sends a fork's, and the pull request gets its comment and its gate
    fork_head = repo.commit(
        {"crates/oxc_linter/src/lib.rs": "// a contributor's linter change\n"}, "from a fork", "fork"
    )
    github.pulls[8], github.forks[8] = ("main", fork_head), "someone/oxc"
    github.workflow_runs["2003"] = (fork_head, "someone/oxc")
    fork_merge = repo.merge(moved, fork_head, 8)
    forked = workflow.run(2003, _pull_request("opened", 8, fork_head, moved, fork_merge, "someone/oxc"), secrets={})
    assert set(_results(forked).values()) == {"success"}, [j.said for j in forked]
    assert not any("::warning" in said for job in forked for said in job.said), [j.said for j in forked]
    assert _forwards(upstream, 2003) == [benchmarks("linter")]  # the plan's one shard; the others left to CodSpeed
    sent = upstream.uploads(run_id="2003")[0]
    said = json.loads((sent / "metadata.json").read_text())
    # what CodSpeed's runner would say for that job: the merge commit it checked out, the fork's branch as owner:branch
    assert (said["tokenless"], said["commitHash"], said["headRef"]) == (True, fork_merge, "someone:fix-linter")
    assert "Authorization" not in json.loads((sent / "post-headers.json").read_text())
    # the bytes the client sent go upstream as they are: the run hash it printed names them
    run_hash = hashlib.sha256((sent / "post-body.json").read_bytes()).hexdigest()
    assert any(f'CodSpeed Run Hash: "{run_hash}"' in said for job in forked for said in job.said)
    assert _states(api_url, PROJECT, 2003, 1) == ["forwarded"]
    forks_comment = [c for c in github.comments.values() if c["number"] == 8]
    assert len(forks_comment) == 1 and fork_head[:12] in forks_comment[0]["body"], github.comments


def _merge_request(pipeline_id: int, head: str, base: str, iid: int = 5) -> Pipeline:
    """A merge request pipeline's predefined variables (not a merged results one: the source branch's head)."""
    return Pipeline(
        pipeline_id,
        head,
        {
            "CI_PIPELINE_SOURCE": "merge_request_event",
            "CI_COMMIT_REF_NAME": "fix-linter",
            "CI_MERGE_REQUEST_IID": str(iid),
            "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "fix-linter",
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
            "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
            "CI_MERGE_REQUEST_PROJECT_PATH": GITLAB_PROJECT,
            "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": GITLAB_PROJECT,
        },
    )


GITLAB_PROJECT = "acme/tools/oxc"  # a subgroup's project


def test_a_merge_requests_life_through_the_docs_gitlab_pipeline(aggregator, gitlab, github, tmp_path):
    api_url, upstream = aggregator
    assert len(GITLAB_PIPELINE) == 1
    repo = Repository(tmp_path / "oxc", github)
    tools = _tools(tmp_path / "tools")
    ci = GitLabCi(
        GITLAB_PIPELINE[0],
        GITLAB_PROJECT,
        repo.path,
        tmp_path / "jobs",
        path=[tools],
        variables={"CODSPEED_AGGREGATOR_URL": api_url, "CODSPEED_AGGREGATOR_TOKEN": TOKEN},
    )
    root = repo.commit(OXC, "oxc")
    main = ci.run(
        Pipeline(3000, root, {"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "main", "CI_COMMIT_REF_NAME": "main"})
    )
    assert {j.result for j in main.jobs.values()} == {"success"}, [j.said for j in main.jobs.values()]

    head1 = repo.commit(
        {
            "benches/linter/costs.txt": SLOWER.format("linter"),
            "crates/oxc_parser/src/lib.rs": "// parser, refactored\n",
        },
        "slower linter",
        "fix-linter",
    )
    repo.commit({"crates/oxc_minifier/src/lib.rs": "// minifier, changed on main\n"}, "main moves")
    first = ci.run(_merge_request(3001, head1, root), failing=frozenset({"bench-linter"}))
    assert {n: j.result for n, j in first.jobs.items()} == {
        "plan": "success",
        "bench-linter": "failed",
        "bench-parser": "success",
        "bench-minifier": "success",
        "gate": "failed",
    }
    assert "skipped by the plan" in first.jobs["bench-minifier"].said
    assert ci.retry(first, "bench-linter").result == "success"
    gate = ci.retry(first, "gate")
    assert gate.result == "failed" and "worst benches/linter/test_bench.py::test_linter_" in gate.said, gate.said

    head2 = repo.commit({"benches/linter/costs.txt": COSTS.format("linter")}, "faster again", "fix-linter")
    second = ci.run(_merge_request(3002, head2, root))
    assert {j.result for j in second.jobs.values()} == {"success"}, [j.said for j in second.jobs.values()]

    assert _states(api_url, GITLAB_PROJECT, 3001, 3) == ["forwarded", "forwarded", None]  # the retry: one attempt
    assert _states(api_url, GITLAB_PROJECT, 3002, 2) == ["forwarded", None]
    assert [benchmarks_in(archive_of(u)) for u in upstream.uploads(run_id="3001")] == [
        benchmarks("parser"),
        benchmarks("linter"),
    ]  # the minifier, skipped by the plan, left to CodSpeed
    assert not upstream.benchmarks_twice(GITLAB_PROJECT)
    notes = [n for n in gitlab.notes.values() if n["merge_request"] == 5]
    assert len(notes) == 1 and notes[0]["project"] == "acme%2Ftools%2Foxc", gitlab.notes
    assert head2[:12] in notes[0]["body"] and "1 earlier run of this merge request" in notes[0]["body"], notes[0][
        "body"
    ]


class _Text(HTMLParser):
    """What a reader of a page reads: its text, its links' and controls' attributes left out."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        self.hidden += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def _text_of(html: str) -> str:
    reader = _Text()
    reader.feed(html)
    return " ".join(reader.parts)


def _report(api_url: str, run_id: int) -> dict:
    answer = requests.get(f"{api_url}/v1/runs/{PROJECT}/{run_id}", headers={"Authorization": TOKEN}, timeout=10)
    return answer.json() if answer.status_code == 200 else {}


def _route_1_run(api_url: str, oidc_issuer, gh_run: int, commit: str, costs: list[int], **pull) -> list[int]:
    """The route-1 workflow's matrix jobs of one workflow run, each uploading as CodSpeed's runner does
    with its OIDC token (shard ``i``'s benchmark ``route1::s{i}`` costing ``costs[i - 1]``): the jobs
    past ``costs`` crashed before their upload. ``pull``: a pull request's ref, head and base."""
    from codspeed_local.profiles import callgrind_text
    from tests import runner

    workflow = yaml.safe_load(ROUTE_1[0])
    job = workflow["jobs"]["benchmarks"]
    [codspeed] = [step for step in job["steps"] if step.get("uses", "").startswith("CodSpeedHQ/action@")]
    upload_url = codspeed["with"]["upload-url"].replace("${{ vars.CODSPEED_AGGREGATOR_URL }}", api_url)
    shards = job["strategy"]["matrix"]["shard"]
    owner, repository = PROJECT.split("/")
    for index, (shard, cost) in enumerate(zip(shards[: len(costs)], costs, strict=True)):
        name = f"route1::s{shard}"
        folder = {f"{8100 + index}.out": callgrind_text(8100 + index, [name], 5, costs={name: cost}).encode()}
        archive = runner.folder_archive(folder, gzipped=True)
        part = runner.github_run_part(
            str(gh_run), "benchmarks", "valgrind", matrix={"shard": shard}, job_index=index, job_total=len(shards)
        )
        meta = runner.metadata(
            archive, executor="valgrind", owner=owner, repository=repository, commit=commit, run_part=part, **pull
        )
        sent = runner.upload(api_url, runner.Upload(meta, archive, token=oidc_issuer.token(PROJECT)), upload_url)
        assert sent.post.status_code == 200 and sent.put.status_code == 200, sent.post.text
    return shards


def test_route_1_is_gated_by_the_commit_status_its_run_closed_by_the_workflow_run_webhook(
    aggregator, github, oidc_issuer
):
    """The README's route 1 as it is: CodSpeed's own workflow with `id-token: write` and the upload URL,
    no job of ours. Four matrix jobs upload as CodSpeed's runner does, each with its OIDC token; the
    fourth crashes before its upload. GitHub's workflow_run webhook closes the run at the workflow's
    end: the required status fails, saying which shard is missing."""
    api_url, _ = aggregator
    workflow = yaml.safe_load(ROUTE_1[0])
    job = workflow["jobs"]["benchmarks"]
    assert list(workflow["jobs"]) == ["benchmarks"] and job["permissions"] == {"id-token": "write"}
    gh_run, commit = 4001, hashlib.sha1(b"route 1").hexdigest()
    shards = _route_1_run(api_url, oidc_issuer, gh_run, commit, [1000, 1000, 1000])  # the last job crashed
    assert len(shards) == 4

    def on_commit() -> list[dict]:
        return [s for s in github.statuses if s["path"].endswith(f"/statuses/{commit}")]

    wait_for(lambda: any(s["state"] == "pending" for s in on_commit()))  # a required check, running
    _workflow_run_completed(api_url, gh_run, 1, commit)  # the workflow's last job ended: the crashed one too
    wait_for(lambda: on_commit() and on_commit()[-1]["state"] != "pending", timeout=60)
    final = on_commit()[-1]
    assert (final["context"], final["state"]) == ("codspeed/shards", "failure")
    assert final["description"] == "forwarded 3/4 shards; missing: benchmarks: 1 of 4 never came", final


def test_route_1_with_a_regression_and_a_crashed_job_names_shards_as_their_ci_shows_them_everywhere(
    aggregator, github, oidc_issuer
):
    """A route-1 pull request whose shard 1 regressed by 20% and whose job 4 crashed. The regression
    tables said ``benchmarks-shard-1-job-index-0-job-total-4-executor-valgrind-run-index-0!e958d9e6b7``
    beside a shard table saying ``benchmarks [shard 1, job 1/4]``, and the status hid the regression
    behind the missing shard. Now the status says both, and the comment, the page, the status and
    ``codspeed-client status`` name shards by the names the CI shows, never by a storage key."""
    from codspeed_rules.names import JOB_KEY_PATTERN

    api_url, _ = aggregator
    main, pulled = hashlib.sha1(b"route 1 main").hexdigest(), hashlib.sha1(b"route 1 pull").hexdigest()
    head = hashlib.sha1(b"route 1 head").hexdigest()  # the pull request's head: its status goes there
    github.commits[pulled] = [main, head]  # GitHub's merge commit of it
    _route_1_run(api_url, oidc_issuer, 4101, main, [1000, 1000, 1000, 1000])
    _workflow_run_completed(api_url, 4101, 1, main)
    wait_for(lambda: _report(api_url, 4101).get("state") == "forwarded", timeout=60)  # main's: the baseline
    pull = {"ref": "refs/pull/77/merge", "head_ref": "route-1-change", "base_ref": "main", "event": "pull_request"}
    _route_1_run(api_url, oidc_issuer, 4102, pulled, [1200, 1000, 1000], **pull)  # job 4 crashed
    _workflow_run_completed(api_url, 4102, 1, pulled)
    report = wait_for(lambda: (r := _report(api_url, 4102)).get("state") == "forwarded" and r, timeout=60)

    def on_commit() -> list[dict]:
        return [s for s in github.statuses if s["path"].endswith(f"/statuses/{head}")]

    status = wait_for(lambda: on_commit() and on_commit()[-1]["state"] != "pending" and on_commit()[-1], timeout=60)
    assert status["state"] == "failure" and status["description"] == (
        "forwarded 3/4 shards; missing: benchmarks: 1 of 4 never came; 1 regression past 5% (worst +20.0%)"
    ), status

    def final_comment() -> str | None:  # the comment is edited as the run goes: its last version says the end
        bodies = [c["body"] for c in github.comments.values() if c["number"] == 77]
        return bodies[-1] if bodies and "forwarded, 3/4 shards in" in bodies[-1] else None

    comment = wait_for(final_comment, timeout=30)
    page = _text_of(requests.get(report["page_url"], timeout=10).text)
    client = subprocess.run(
        [sys.executable, "-m", "codspeed_client.cli", "status", "--project", PROJECT, "--run-id", "4102"],
        env={**os.environ, "CODSPEED_AGGREGATOR_URL": api_url, "CODSPEED_AGGREGATOR_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "route1::s1" in page and "benchmarks [shard 1, job 1/4]" in client.stdout
    for where, text in (
        ("comment", comment),
        ("page", page),
        ("status", status["description"]),
        ("client", client.stdout),
    ):
        assert not re.search(JOB_KEY_PATTERN, text), (where, re.search(JOB_KEY_PATTERN, text).group(0))
    assert "| route1\\:\\:s1 | benchmarks \\[shard 1, job 1/4\\] | +20.0% |" in comment  # Markdown-escaped
