"""GitHub Actions, as its runner runs this repository's action and a workflow of its jobs.

``Runner``: one job running ``action.yml`` as a composite action: each step's script written to a
file and run with ``bash --noprofile --norc -eo pipefail``, its ``${{ }}`` expressions substituted,
GITHUB_OUTPUT, RUNNER_TEMP and GITHUB_STEP_SUMMARY set, the step's working-directory honoured.

``Workflow``: a workflow file's jobs, in the order their ``needs`` give, each matrix leg a job of
its own, with the environment GitHub documents for a job; ``if:``, job outputs, and the two kinds
of re-run (all jobs; failed jobs and the jobs that need them, the others keeping their results and
outputs). ``actions/checkout`` fetches the commit as actions/checkout does (depth 1 unless
``fetch-depth: 0``); ``run:`` steps run in bash as GitHub runs them. Expressions outside the few the
docs' workflows use are refused, so a workflow in the docs never runs here on a guess."""

import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
OURS = "acme/codspeed-shard-aggregator@main"  # how the docs name this repository's action
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")


class Runner:
    """One job: its environment, its runner.temp, and the outputs of the steps run so far."""

    def __init__(self, tmp: Path, python_bin: Path, env: dict) -> None:
        self.temp = tmp / "runner-temp"
        self.workspace = tmp / "workspace"
        for folder in (self.temp, self.workspace):
            folder.mkdir(parents=True, exist_ok=True)
        self.summary = tmp / "summary.md"
        self.env = {
            "PATH": f"{python_bin}:/usr/bin:/bin",
            "HOME": str(tmp),
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_WORKSPACE": str(self.workspace),
            **env,
        }
        self.last_out = ""

    def preinstall(self) -> None:
        """The client as the action's install step leaves it, from this test run's own environment (no
        second install)."""
        venv = self.temp / "codspeed-client-venv" / "bin"
        venv.mkdir(parents=True)
        for name in ("python", "codspeed-client"):
            (venv / name).symlink_to(Path(sys.executable).parent / name)

    def use(self, inputs: dict) -> tuple[int, dict, str]:
        """Run the action's steps in order; answers the last exit code, the action's outputs and stderr."""
        values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()} | inputs
        steps: dict[str, dict] = {}
        code, err = 0, ""
        for index, step in enumerate(ACTION["runs"]["steps"]):
            output_file = self.temp / f"output-{index}"
            output_file.write_text("")

            def expand(text: str) -> str:
                def value(match):
                    expr = match[1].strip()
                    if expr.startswith("inputs."):
                        return values[expr.removeprefix("inputs.")]
                    if expr == "github.action_path":
                        return str(ROOT)
                    if expr == "runner.temp":
                        return str(self.temp)
                    found = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
                    return steps.get(found[1], {}).get(found[2], "")

                return _EXPRESSION.sub(value, text)

            script = self.temp / f"step-{index}.sh"
            script.write_text(expand(step["run"]))
            env = {
                **self.env,
                **{k: expand(v) for k, v in (step.get("env") or {}).items()},
                "GITHUB_OUTPUT": str(output_file),
            }
            cwd = self.workspace / expand(step.get("working-directory", "."))
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            code, err, self.last_out = done.returncode, done.stderr, done.stdout
            steps[step.get("id", str(index))] = _outputs(output_file)
            if code:
                break
        outputs = {
            name: re.sub(
                r"\$\{\{ steps\.([\w-]+)\.outputs\.([\w-]+) \}\}",
                lambda m: steps.get(m[1], {}).get(m[2], ""),
                spec["value"],
            )
            for name, spec in ACTION["outputs"].items()
        }
        return code, outputs, err


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@dataclass
class Job:
    """One job (one matrix leg) of one attempt: how it ended, its outputs, what its steps said."""

    name: str
    matrix: dict
    attempt: int
    result: str = "success"  # success, failure or skipped, as ``needs.<job>.result`` says
    outputs: dict = field(default_factory=dict)
    said: list[str] = field(default_factory=list)  # each action or run step's stdout and stderr
    codes: list[int] = field(default_factory=list)  # and its exit code
    summary: str = ""


@dataclass
class Event:
    """What starts a workflow run: its name, its payload, and the commit and ref GitHub gives the jobs."""

    name: str
    payload: dict
    sha: str
    ref: str
    head_ref: str = ""
    base_ref: str = ""


class Workflow:
    """A workflow file's jobs against one repository (``origin``, a git repository on disk)."""

    def __init__(  # noqa: PLR0913 -- a workflow, where it runs, and the GitHub that lists its jobs
        self,
        text: str,
        project: str,
        origin: Path,
        tmp: Path,
        *,
        vars: dict,
        secrets: dict,
        path: list[Path],
        github=None,
    ) -> None:
        self.jobs = yaml.safe_load(text)["jobs"]
        self.project, self.origin, self.tmp = project, origin, tmp
        self.vars, self.secrets, self.path = vars, secrets, path
        self.github = github  # a FakeGitHub: each attempt's jobs listed there as they run (RUNNER_NAME, status)
        subprocess.run(["git", "-C", str(origin), "config", "uploadpack.allowAnySHA1InWant", "true"], check=True)

    def run(
        self,
        run_id: int,
        event: Event,
        *,
        attempt: int = 1,
        rerun: str | None = None,
        earlier: list[Job] | None = None,
        failing: frozenset = frozenset(),
        secrets: dict | None = None,
    ) -> list[Job]:
        """One attempt of a workflow run. ``rerun``: "all" or "failed" (with ``earlier``, the
        previous attempt's jobs); ``failing``: (job, matrix value) legs whose ``run`` steps fail."""
        done: dict[str, list[Job]] = {}
        rerun_jobs: set[str] = set()
        for name in self._ordered():
            spec = self.jobs[name]
            needs = _listed(spec.get("needs"))
            kept = [j for j in earlier or () if j.name == name]
            again = rerun == "all" or not kept or any(j.result == "failure" for j in kept) or rerun_jobs & set(needs)
            if rerun == "failed" and not again:
                done[name] = kept
                continue
            rerun_jobs.add(name)
            context = {
                "vars": self.vars,
                "secrets": self.secrets if secrets is None else secrets,
                "needs": {
                    n: {"outputs": _merged(j.outputs for j in done[n]), "result": _result(done[n])} for n in needs
                },
            }
            if not self._condition(spec.get("if"), context, needs):
                done[name] = [Job(name, {}, attempt, "skipped")]
                continue
            legs = self._matrix(spec, context)
            if rerun == "failed" and kept and not rerun_jobs & set(needs):  # only the failed legs run again
                legs = [leg for leg in legs if any(j.matrix == leg and j.result == "failure" for j in kept)]
                done[name] = [j for j in kept if j.result != "failure"]
            else:
                done[name] = []
            for leg in legs:
                done[name].append(self._job(name, spec, leg, context, run_id, event, attempt, failing))
        return [job for jobs in done.values() for job in jobs]

    def _ordered(self) -> list[str]:
        ordered: list[str] = []
        while len(ordered) < len(self.jobs):
            ordered += [
                n for n, s in self.jobs.items() if n not in ordered and set(_listed(s.get("needs"))) <= set(ordered)
            ]
        return ordered

    def _condition(self, expression, context: dict, needs: list[str]) -> bool:
        if expression is None:
            return all(context["needs"][n]["result"] == "success" for n in needs)
        expression = _EXPRESSION.sub(lambda m: m[1], str(expression)).strip()
        if expression == "always()":
            return True
        compared = re.fullmatch(r"(.+?)\s*(==|!=)\s*''", expression)
        if not compared:
            raise ValueError(f"an if: this emulation does not know: {expression}")
        empty = _value(compared[1], context) == ""
        ok = empty if compared[2] == "==" else not empty
        return ok and all(context["needs"][n]["result"] == "success" for n in needs)

    def _matrix(self, spec: dict, context: dict) -> list[dict]:
        matrix = (spec.get("strategy") or {}).get("matrix")
        if matrix is None:
            return [{}]
        if isinstance(matrix, str):
            matrix = _value(_EXPRESSION.fullmatch(matrix.strip())[1], context)
        include = matrix.pop("include", []) if isinstance(matrix, dict) else []
        axes = {k: v for k, v in matrix.items() if k != "exclude"}
        legs = [dict(zip(axes, values, strict=False)) for values in itertools.product(*axes.values())] if axes else []
        return legs + include

    def _job(  # noqa: PLR0913 -- a job of a workflow run, as GitHub expands it
        self,
        name: str,
        spec: dict,
        matrix: dict,
        context: dict,
        run_id: int,
        event: Event,
        attempt: int,
        failing: frozenset,
    ) -> Job:
        leg = "-".join(str(v) for v in matrix.values())
        listed = self.github.jobs.setdefault((str(run_id), attempt), []) if self.github is not None else []
        runner_name = f"GitHub Actions {1000 + len(listed)}"  # a hosted runner's name, one a job
        label = f"{name} ({', '.join(str(v) for v in matrix.values())})" if matrix else name
        listed.append((label, runner_name, "in_progress"))
        tmp = self.tmp / f"{run_id}-{attempt}-{name}-{leg}"
        tmp.mkdir(parents=True)
        event_path = tmp / "event.json"
        event_path.write_text(json.dumps(event.payload))
        env = {
            "GITHUB_ACTIONS": "true",
            "CI": "true",
            "GITHUB_REPOSITORY": self.project,
            "GITHUB_RUN_ID": str(run_id),
            "GITHUB_RUN_ATTEMPT": str(attempt),
            "GITHUB_RUN_NUMBER": str(run_id % 1000),
            "GITHUB_SHA": event.sha,
            "GITHUB_REF": event.ref,
            "GITHUB_HEAD_REF": event.head_ref,
            "GITHUB_BASE_REF": event.base_ref,
            "GITHUB_EVENT_NAME": event.name,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_JOB": name,
            "GITHUB_ACTOR": "octocat",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_ACTION_PATH": str(ROOT),
            "RUNNER_NAME": runner_name,
            "PATH": ":".join(str(p) for p in self.path) + ":/usr/bin:/bin",
        }
        if (name, *matrix.values()) in failing:
            env["BENCHMARKS_CRASH"] = "1"  # what this leg's benchmark command does in this attempt
        runner = Runner(tmp, Path(sys.executable).parent, env)
        runner.preinstall()
        job = Job(name, matrix, attempt)
        context = {**context, "matrix": matrix, "runner": {"temp": str(runner.temp)}, "steps": {}}
        for index, step in enumerate(spec["steps"]):
            code = self._step(step, index, runner, context, event, job)
            if "uses" not in step or step["uses"] == OURS:
                job.codes.append(code)
            if code:
                job.result = "failure"
                break
        job.outputs = {k: _substitute(v, context) for k, v in (spec.get("outputs") or {}).items()}
        job.summary = runner.summary.read_text() if runner.summary.exists() else ""
        listed[listed.index((label, runner_name, "in_progress"))] = (label, runner_name, "completed")
        return job

    def _step(self, step: dict, index: int, runner: Runner, context: dict, event: Event, job: Job) -> int:
        inputs = {k: _substitute(str(v), context) for k, v in (step.get("with") or {}).items()}
        if step.get("uses", "").startswith("actions/checkout@"):
            return self._checkout(runner.workspace, event.sha, inputs.get("fetch-depth", "1") == "0")
        if step.get("uses") == OURS:
            code, outputs, err = runner.use(inputs)
            job.said.append(runner.last_out + err)
            context["steps"][step.get("id", str(index))] = {"outputs": outputs}
            return code
        if "run" in step:
            script = runner.temp / f"run-{index}.sh"
            script.write_text(_substitute(step["run"], context))
            output = runner.temp / f"run-output-{index}"
            output.write_text("")
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=runner.workspace,
                env={**runner.env, "GITHUB_OUTPUT": str(output)},
                capture_output=True,
                text=True,
                timeout=300,
            )
            job.said.append(done.stdout + done.stderr)
            context["steps"][step.get("id", str(index))] = {"outputs": _outputs(output)}
            return done.returncode
        raise ValueError(f"a step this emulation does not know: {step}")

    def _checkout(self, workspace: Path, sha: str, full: bool) -> int:
        """As actions/checkout: the commit alone (depth 1), or every branch's history too (fetch-depth: 0)."""
        git = ["git", "-C", str(workspace)]
        origin = f"file://{self.origin}"
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        if full:
            subprocess.run([*git, "fetch", "-q", origin, "+refs/heads/*:refs/remotes/origin/*"], check=True)
        subprocess.run([*git, "fetch", "-q", *(() if full else ("--depth=1",)), origin, sha], check=True)
        return subprocess.run([*git, "checkout", "-q", "--detach", sha], check=True).returncode


def _listed(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _merged(dicts) -> dict:
    merged: dict = {}
    for d in dicts:
        merged |= d
    return merged


def _result(jobs: list[Job]) -> str:
    results = {j.result for j in jobs}
    return "failure" if "failure" in results else "skipped" if results == {"skipped"} else "success"


def _value(expression: str, context: dict):
    """A context's value (``needs.plan.outputs.matrix``), or ``fromJSON(...)`` of one."""
    expression = expression.strip()
    if inner := re.fullmatch(r"fromJSON\((.+)\)", expression):
        return json.loads(_value(inner[1], context))
    if not re.fullmatch(r"[\w-]+(\.[\w-]+)+", expression):
        raise ValueError(f"an expression this emulation does not know: {expression}")
    name, *path = expression.split(".")
    if name not in context:
        raise ValueError(f"a context this emulation does not give: {name}")
    value = context[name]
    for part in path:
        value = value.get(part, "") if isinstance(value, dict) else ""  # GitHub: a missing name is empty
    return value


def _substitute(text: str, context: dict) -> str:
    return _EXPRESSION.sub(lambda m: str(_value(m[1], context)), text)
