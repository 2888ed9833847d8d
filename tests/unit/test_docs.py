"""What users copy from the README and the docs site works: every fenced block says what it is,
each shell line of ours parses with our own parsers, each workflow uses only inputs and outputs
that exist, each config loads, and the site builds with every warning an error (links and
anchors included). Blocks are found by their ``<!-- docs-check: KIND -->`` marker, not by the
text around them, so they can move between pages."""

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from codspeed_aggregator.cli import parser as aggregator_parser
from codspeed_client.cli import parser as client_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
# CodSpeedHQ/action's inputs (its README and action.yml: v3, and v4's mode): a workflow here may set no other.
CODSPEED_ACTION_INPUTS = {
    "token",
    "run",
    "working-directory",
    "upload-url",
    "runner-version",
    "instruments",
    "mongo_uri_env_name",
    "shell",
    "mode",
}
LANGUAGES = {"sh", "yaml", "toml", "json", "text"}
FENCE = re.compile(r"(?:<!-- docs-check: ([\w-]+) -->\n)?^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks(kind: str | None = None):
    """(page, language, marker, text) of every fenced block of the README and the docs."""
    for page in PAGES:
        for marker, language, text in FENCE.findall(page.read_text()):
            if kind is None or marker == kind:
                yield page.relative_to(ROOT), language, marker, text


def commands(script: str) -> list[list[str]]:
    """Each line of a shell script that runs one of our commands, as its arguments."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(re.sub(r"\$\([^)]*\)", "SUBSTITUTED", line), comments=True)
        ends = [i for i, word in enumerate(words) if word in ("&", "&&", "|", "||", ";", ">", ">>")]
        words = words[: ends[0]] if ends else words
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words.pop(0)
        if words and Path(words[0]).name in ("codspeed-client", "codspeed-aggregator"):
            found.append(words)
    return found


def parses(words: list[str]) -> None:
    program = client_parser() if Path(words[0]).name == "codspeed-client" else aggregator_parser()
    try:
        program.parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"{' '.join(words)}: refused by {words[0]}'s parser (exit {exc.code})")


def test_every_block_says_what_it_is():
    untyped = [(str(page), text[:40]) for page, language, _, text in blocks() if language not in LANGUAGES]
    assert not untyped, f"a fenced block needs one of {sorted(LANGUAGES)} ('text' for what is not copied): {untyped}"


def test_every_shell_line_of_ours_parses():
    seen = 0
    for _page, language, _, text in blocks():
        if language == "sh":
            for words in commands(text):
                parses(words)
                seen += 1
    assert seen >= 15, seen  # the client's page alone has 12


def test_make_targets_named_in_the_docs_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    named = {
        line.split()[1]
        for _, language, _, text in blocks()
        if language == "sh"
        for line in text.splitlines()
        if line.startswith("make ")
    }
    assert named and named <= targets, named - targets


def test_the_deploy_blocks_name_the_templates_parameters():
    template = (ROOT / "template.yaml").read_text()
    defaults = set(re.findall(r"Default: (/codspeed-aggregator/[\w-]+)", template))
    deploys = [text for _, _, _, text in blocks("deploy")]
    assert deploys
    for text in deploys:
        names = set(re.findall(r"--name (\S+)", text))
        assert names and names <= defaults, names - defaults
        for words in commands(text):
            parses(words)


def _steps(workflow: dict):
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, job, step


def _check_expressions(workflow: dict, page) -> None:
    """``needs.J.outputs.O`` names a job this one needs and an output it declares; ``steps.S.outputs.O``
    a step of the job with that id, and an output our action has."""
    for name, job in workflow["jobs"].items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert set(needs) <= set(workflow["jobs"]), f"{page}: {name} needs {needs}"
        text = yaml.safe_dump(job)
        for needed, output in re.findall(r"needs\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert needed in needs, f"{page}: job {name} reads {needed}'s outputs without needing it"
            assert output in workflow["jobs"][needed].get("outputs", {}), f"{page}: {needed} has no output {output}"
        ids = {step.get("id"): step for step in job.get("steps", [])}
        for step_id, output in re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert step_id in ids, f"{page}: job {name} reads step {step_id}, which it does not have"
            assert output in ACTION["outputs"], f"{page}: the action has no output {output}"


def test_every_workflow_uses_what_its_actions_have():
    workflows = list(blocks("workflow"))
    assert len(workflows) >= 4  # the README's routes, and each on its docs page
    for page, language, _, text in workflows:
        assert language == "yaml"
        workflow = yaml.safe_load(text)
        _check_expressions(workflow, page)
        ours = 0
        for _, _, step in _steps(workflow):
            used, given = step.get("uses", ""), set(step.get("with", {}))
            if used.startswith("acme/codspeed-shard-aggregator@"):
                ours += 1
                assert given <= set(ACTION["inputs"]), f"{page}: {given - set(ACTION['inputs'])}"
                required = {k for k, spec in ACTION["inputs"].items() if spec.get("required")}
                assert required <= given, f"{page}: {required - given} missing"
                command = step["with"].get("command", "push")
                assert command in ("plan", "open", "push", "close", "status"), command
            elif used.startswith("CodSpeedHQ/action@"):
                assert given <= CODSPEED_ACTION_INPUTS and "run" in given, f"{page}: {given - CODSPEED_ACTION_INPUTS}"
            for words in commands(step.get("run", "")):
                parses(words)
        assert ours, f"{page}: a workflow that does not use this repository's action"


def test_every_workflow_route_ends_with_the_gate():
    for page, _, _, text in blocks("workflow"):
        gate = yaml.safe_load(text)["jobs"]["gate"]
        assert gate["if"] == "always()"
        assert any(step.get("with", {}).get("fail-on-regression") for step in gate["steps"]), page


def test_the_drop_in_route_gated_by_the_commit_status_is_codspeed_s_workflow_and_two_lines():
    """Route 1 with the commit status as its gate: CodSpeed's own job, its OIDC token and the upload
    URL, and no job of ours; what makes it a gate (webhook, status, branch rule) is said beside it."""
    routes = list(blocks("workflow-status"))
    assert {page.name for page, *_ in routes} == {"README.md", "runner.md"}
    for page, language, _, text in routes:
        workflow = yaml.safe_load(text)
        assert language == "yaml" and list(workflow["jobs"]) == ["benchmarks"], page
        job = workflow["jobs"]["benchmarks"]
        assert job["permissions"] == {"id-token": "write"}
        [codspeed] = [step for step in job["steps"] if step.get("uses", "").startswith("CodSpeedHQ/action@")]
        assert codspeed["with"]["upload-url"] == "${{ vars.CODSPEED_AGGREGATOR_URL }}/upload"
        assert set(codspeed["with"]) <= CODSPEED_ACTION_INPUTS
        assert len(text.splitlines()) <= 20, page
    said = (ROOT / "docs" / "runner.md").read_text()
    for step in (
        "`CommitStatus=true`",
        "/webhooks/github",
        "codspeed-aggregator webhook-secret --project",
        "a branch rule requires the status `codspeed/shards`",
        "posts none, and GitHub blocks a merge",
    ):
        assert step in said, step


def test_the_readmes_routes_are_the_docs_pages_own():
    for kind, count in (("workflow", 1), ("workflow-status", 1)):
        readme = [text for page, _, _, text in blocks(kind) if page.name == "README.md"]
        docs = [text for page, _, _, text in blocks(kind) if page.name != "README.md"]
        assert len(readme) == count, kind
        assert all(route in docs for route in readme), "a README route differs from its docs page's"


def _circleci_runs(job: dict) -> list[str]:
    return [
        step["run"] if isinstance(step["run"], str) else step["run"]["command"]
        for step in job.get("steps", [])
        if isinstance(step, dict) and "run" in step
    ]


def test_gitlab_buildkite_and_circleci_pipelines_parse_and_name_their_jobs():
    seen = 0
    for kind, scripts_of in (
        ("gitlab", _gitlab_scripts),
        ("buildkite", _buildkite_scripts),
        ("circleci", _circleci_scripts),
    ):
        for page, language, _, text in blocks(kind):
            assert language == "yaml"
            for line in scripts_of(page, yaml.safe_load(text)):
                for words in commands(line.replace("$$", "$")):
                    parses(words)
                    seen += 1
    assert seen >= 9, seen


def _gitlab_scripts(page: str, pipeline: dict) -> list[str]:
    """A GitLab pipeline's script lines; each job's needs and extends are jobs of it."""
    scripts = []
    for name, job in pipeline.items():
        assert set(job.get("needs", [])) <= set(pipeline), f"{page}: {name} needs {job['needs']}"
        assert job.get("extends", name) in pipeline, f"{page}: {name} extends {job['extends']}"
        scripts += job.get("before_script", []) + job.get("script", [])
    return scripts


def _buildkite_scripts(_page: str, pipeline: dict) -> list[str]:
    scripts = []
    for step in pipeline["steps"]:
        command = step.get("command", [])
        scripts += [command] if isinstance(command, str) else command
    return scripts


def _circleci_scripts(page: str, pipeline: dict) -> list[str]:
    """A CircleCI config's run lines; what each workflow runs and requires are jobs of it."""
    for workflow in pipeline["workflows"].values():
        for entry in workflow["jobs"]:
            ((name, spec),) = entry.items() if isinstance(entry, dict) else ((entry, {}),)
            assert name in pipeline["jobs"], f"{page}: workflow runs {name}, which is not a job"
            required = [next(iter(r)) if isinstance(r, dict) else r for r in (spec or {}).get("requires", [])]
            assert set(required) <= set(pipeline["jobs"]), f"{page}: {name} requires {required}"
    return [line for job in pipeline["jobs"].values() for line in _circleci_runs(job)]


def _gates() -> list[tuple[str, list[str], bool]]:
    """Every gate of the docs and the README: (where, its commands of ours in order, whether it runs
    whatever its shard jobs did)."""
    found = []
    for page, _, _, text in blocks("workflow"):
        gate = yaml.safe_load(text)["jobs"]["gate"]
        commands_ = [
            step["with"].get("command", "push")
            for step in gate["steps"]
            if step.get("uses", "").startswith("acme/codspeed-shard-aggregator@")
        ]
        found.append((f"{page} (GitHub)", commands_, gate.get("if") == "always()" and bool(gate.get("needs"))))
    for page, _, _, text in blocks("gitlab"):
        pipeline = yaml.safe_load(text)
        lines = pipeline["gate"].get("script", [])
        found.append(
            (
                f"{page} (GitLab)",
                [w[1] for line in lines for w in commands(line)],
                pipeline["gate"].get("when") == "always",
            )
        )
    for page, _, _, text in blocks("buildkite"):
        steps = yaml.safe_load(text)["steps"]
        waits = [s for s in steps if "wait" in s]
        found.append(
            (
                f"{page} (Buildkite)",
                [w[1] for line in steps[-1]["command"] for w in commands(line)],
                bool(waits) and all(w.get("continue_on_failure") for w in waits),
            )
        )
    for page, _, _, text in blocks("circleci"):
        pipeline = yaml.safe_load(text)
        [spec] = [
            entry["gate"]
            for w in pipeline["workflows"].values()
            for entry in w["jobs"]
            if isinstance(entry, dict) and "gate" in entry
        ]
        runs_anyway = all(isinstance(r, dict) and "failed" in next(iter(r.values())) for r in spec["requires"])
        found.append(
            (
                f"{page} (CircleCI)",
                [w[1] for line in _circleci_runs(pipeline["jobs"]["gate"]) for w in commands(line)],
                runs_anyway,
            )
        )
    return found


def test_every_gate_runs_whatever_its_shards_did_and_closes_the_run_before_it_waits():
    """A crashed shard job then makes the gate exit 11 within seconds, not 12 at the end of its timeout."""
    gates = _gates()
    assert {where.rsplit(" ", 1)[1] for where, _, _ in gates} == {"(GitHub)", "(GitLab)", "(Buildkite)", "(CircleCI)"}
    for where, ours, runs_anyway in gates:
        assert runs_anyway, f"{where}: the gate does not run when a shard job failed"
        assert ours[-2:] == ["close", "status"], f"{where}: the gate runs {ours}, not close then status"


def test_every_config_and_payload_loads():
    from codspeed_client.plan import load

    for page, language, _, text in blocks():
        if language == "toml":
            config = tomllib.loads(text)
            if "shards" in config:
                path = ROOT / ".pytest-shards.toml"
                try:
                    path.write_text(text)
                    assert load(str(path)).shards, page
                finally:
                    path.unlink()
        elif language == "json":
            json.loads(text)


def test_the_readme_stays_short_and_links_only_what_exists():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for target in re.findall(r"\]\((?!https?://)([^)#]+)", readme):
        assert (ROOT / target).is_file(), target


def _build(config_dir: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=config_dir,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    built = _build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "setup" / "gitlab" / "index.html").is_file()


@pytest.mark.slow
def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(copy / "docs")], check=True)
    for broken, said in (
        ("[x](client.md#no-such-anchor)", "does not contain an anchor '#no-such-anchor'"),
        ("[x](no-such-page.md)", "'no-such-page.md', but the target is not found"),
    ):
        page = copy / "docs" / "api.md"
        kept = page.read_text()
        page.write_text(kept + f"\n{broken}\n")
        built = _build(copy, tmp_path / "site")
        page.write_text(kept)
        assert built.returncode != 0 and said in built.stderr, broken


def test_the_project_stands_alone_citing_no_document_outside_it():
    """What the tests rely on of the runner's protocol is in docs/protocol.md, which tests/runner.py cites."""
    outside = "../" + "shared/"  # spelled apart: this test names it, and must not find itself
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout.split()
    citing = [
        p
        for p in tracked
        if p.endswith((".py", ".md", ".yml", ".yaml", ".toml"))
        and (ROOT / p).is_file()
        and (outside in (ROOT / p).read_text() or "RUNNER-" + "PROTOCOL" in (ROOT / p).read_text())
    ]
    assert citing == []
    assert "docs/protocol.md" in (ROOT / "tests" / "runner.py").read_text()


def test_the_client_page_s_exit_sentences_are_what_status_says():
    """docs/client.md's example of a failing status is the client's own output for that run, and
    each exit code of the table that status gives has its sentence."""
    from codspeed_client.report import exit_sentences

    page = (ROOT / "docs" / "client.md").read_text()
    example = re.search(r"reason that applies.*?```text\n(.*?)```", page, re.S)[1].splitlines()
    from tests.unit.test_client import FAILING_RUN as report
    from tests.unit.test_client import OVERLAP as overlap

    regressed = "3 benchmarks regressed past 5% against the baseline: worst parser::lex +12.0%"
    said = [f"codspeed-client: {line}" for line in exit_sentences(report, 11, regressed, False, False)]
    assert said == example
    tabled = {int(code) for code in re.findall(r"^\| (1[0-4]) \| `status", page, re.M)}
    assert tabled == {10, 11, 12, 13, 14}
    cases = {
        10: ({"state": "forward_failed", "shards": [], "upstream": {"message": "503"}}, None, False),
        11: ({"state": "closed_empty", "shards": []}, None, False),
        12: ({"state": "open", "shards": []}, None, True),
        13: ({"state": "forwarded", "shards": []}, regressed, False),
        14: ({"state": "forwarded", "shards": [], "overlaps": [overlap], "overlaps_total": 1}, None, False),
    }
    for code, (run, why, timed_out) in cases.items():
        first = exit_sentences(run, code, why, timed_out, False)[0]
        assert first.startswith(f"exit {code}: ") and len(first) > len(f"exit {code}: ") + 10, (code, first)


def test_every_variable_the_functions_read_is_in_the_deploy_page_s_table():
    code = (ROOT / "functions" / "codspeed_aggregator" / "settings.py").read_text()
    read = set(re.findall(r'(?:env\.get|_flag|_text|_listed)\("([A-Z][A-Z0-9_]+)"', code))
    table = (ROOT / "docs" / "deploy.md").read_text().split("## What the functions read", 1)[1]
    named = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    assert len(read) >= 40 and read <= named, sorted(read - named)  # 48 before eight became constants
    assert named <= read | {"AWS_ENDPOINT_URL"}, sorted(named - read)  # no row for a variable nothing reads
