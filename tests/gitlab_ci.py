"""GitLab CI, as its runner runs a pipeline of the docs: jobs by stage (``.pre``, ``test``,
``.post``) and ``needs``, hidden jobs merged by ``extends``, job ``variables``, ``when: always``,
dotenv reports handed to the jobs after, each job's ``before_script`` and ``script`` in one bash
session stopping at the first failing line, with the predefined variables GitLab documents for a
merge request pipeline or a branch pipeline; a retried job is a new job (a new ``CI_JOB_ID``) of
the same pipeline. Keywords outside these are refused, so a pipeline in the docs never runs here
on a guess."""

import itertools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

STAGES = (".pre", "build", "test", "deploy", ".post")
KNOWN = {"stage", "needs", "extends", "variables", "when", "before_script", "script", "artifacts"}
_JOB_IDS = itertools.count(9_000_001)


@dataclass
class Job:
    name: str
    job_id: int
    result: str = "success"  # success, failed or skipped
    said: str = ""
    dotenv: dict = field(default_factory=dict)


@dataclass
class Pipeline:
    """What starts a pipeline: its id, its source's variables, and the commit it checks out."""

    pipeline_id: int
    sha: str
    variables: dict
    jobs: dict = field(default_factory=dict)  # name -> its latest Job


class GitLabCi:
    def __init__(self, text: str, project: str, origin: Path, tmp: Path, *, variables: dict, path: list[Path]) -> None:
        spec = yaml.safe_load(text)
        self.jobs = {name: self._extended(spec, name) for name in spec if not name.startswith(".")}
        for name, job in self.jobs.items():
            if set(job) - KNOWN:
                raise ValueError(f"{name}: keywords this emulation does not know: {set(job) - KNOWN}")
        self.project, self.origin, self.tmp, self.variables, self.path = project, origin, tmp, variables, path
        subprocess.run(["git", "-C", str(origin), "config", "uploadpack.allowAnySHA1InWant", "true"], check=True)

    @staticmethod
    def _extended(spec: dict, name: str) -> dict:
        job = dict(spec[name])
        parent = job.pop("extends", None)
        if parent:
            base = GitLabCi._extended(spec, parent)
            job = {**base, **job, "variables": {**base.get("variables", {}), **job.get("variables", {})}}
        return job

    def run(self, pipeline: Pipeline, failing: frozenset = frozenset()) -> Pipeline:
        """Every job of a new pipeline, stage by stage; ``failing``: jobs whose benchmarks crash."""
        order = sorted(self.jobs, key=lambda n: STAGES.index(self.jobs[n].get("stage", "test")))
        for name in order:
            pipeline.jobs[name] = self._job(pipeline, name, failing)
        return pipeline

    def retry(self, pipeline: Pipeline, name: str) -> Job:
        """The retry button on one job: a new job of the same pipeline."""
        pipeline.jobs[name] = self._job(pipeline, name, frozenset())
        return pipeline.jobs[name]

    def _job(self, pipeline: Pipeline, name: str, failing: frozenset) -> Job:
        spec = self.jobs[name]
        stage = STAGES.index(spec.get("stage", "test"))
        earlier = [j for n, j in pipeline.jobs.items() if STAGES.index(self.jobs[n].get("stage", "test")) < stage]
        needed = [pipeline.jobs[n] for n in spec["needs"]] if "needs" in spec else earlier
        job = Job(name, next(_JOB_IDS))
        if spec.get("when", "on_success") == "on_success" and any(j.result == "failed" for j in needed):
            job.result = "skipped"
            return job
        folder = self.tmp / f"{pipeline.pipeline_id}-{name}-{job.job_id}"
        workspace = folder / "build"
        workspace.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(workspace)], check=True)
        subprocess.run(
            ["git", "-C", str(workspace), "fetch", "-q", "--depth=20", f"file://{self.origin}", pipeline.sha],
            check=True,
        )
        subprocess.run(["git", "-C", str(workspace), "checkout", "-q", "--detach", pipeline.sha], check=True)
        # pip's user scheme (~/.local/bin) first on PATH, as in the python images' jobs
        env = {
            "PATH": ":".join(str(p) for p in (folder / ".local" / "bin", *self.path)) + ":/usr/bin:/bin",
            "HOME": str(folder),
            "CI": "true",
            "GITLAB_CI": "true",
            "CI_SERVER_URL": "https://gitlab.com",
            "CI_PROJECT_PATH": self.project,
            "CI_PROJECT_DIR": str(workspace),
            "CI_PIPELINE_ID": str(pipeline.pipeline_id),
            "CI_PIPELINE_URL": f"https://gitlab.com/{self.project}/-/pipelines/{pipeline.pipeline_id}",
            "CI_JOB_ID": str(job.job_id),
            "CI_JOB_NAME": name,
            "CI_JOB_STAGE": spec.get("stage", "test"),
            "CI_JOB_URL": f"https://gitlab.com/{self.project}/-/jobs/{job.job_id}",
            "CI_COMMIT_SHA": pipeline.sha,
            "CI_DEFAULT_BRANCH": "main",
            "GITLAB_USER_LOGIN": "maintainer",
            **self.variables,
            **pipeline.variables,
            **{k: str(v) for k, v in spec.get("variables", {}).items()},
        }
        for earlier_job in needed:
            env.update(earlier_job.dotenv)
        if name in failing:
            env["BENCHMARKS_CRASH"] = "1"
        script = "\n".join([*spec.get("before_script", []), *spec["script"]])
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        job.said, job.result = done.stdout + done.stderr, "success" if done.returncode == 0 else "failed"
        dotenv = ((spec.get("artifacts") or {}).get("reports") or {}).get("dotenv")
        if dotenv and (workspace / dotenv).exists():
            job.dotenv = dict(
                line.split("=", 1) for line in (workspace / dotenv).read_text().splitlines() if "=" in line
            )
        return job
