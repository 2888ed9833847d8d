"""CodSpeed's runner (release 5.0.2, and its CircleCI provider after it) as ``docs/protocol.md``
records it: the exact metadata (version 10, every field, in the runner's order), runPartIds with their JSON
suffixes, and the two requests (POST the metadata, PUT the archive with the runner's headers).

Tests build drop-in uploads with this, never with a protocol of their own."""

import base64
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import requests

FIXTURES = Path(__file__).parent / "fixtures" / "pytest_codspeed"
RUNNER_VERSION = "5.0.2"
MACHINE = {
    "os": "ubuntu",
    "osVersion": "24.04",
    "arch": "x86_64",
    "host": "runnervm1",
    "user": "runner",
    "cpuBrand": "AMD EPYC 7763 64-Core Processor",
    "cpuName": "cpu0",
    "cpuVendorId": "AuthenticAMD",
    "cpuCores": 4,
    "totalMemoryGb": 16,
    "cpuFlags": ["avx2", "bmi2", "sse4_2"],
}


def _json(value) -> str:
    """serde_json's compact form, as the runner writes runPartId suffixes."""
    return json.dumps(value, separators=(",", ":"))


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


@dataclass
class Upload:
    """One upload of the runner: its metadata and its archive, and what it was answered."""

    metadata: dict
    archive: bytes
    token: str | None = None
    post: requests.Response | None = None
    put: requests.Response | None = None
    headers: dict = field(default_factory=dict)
    body: bytes = b""  # the POST's bytes, as the runner writes them


def body_of(metadata: dict) -> bytes:
    """The runner's POST body: serde_json's compact form, non-ASCII left as it is, fields in its order."""
    return json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode()


def github_run_part(
    run_id: str,
    job: str,
    executor: str,
    *,
    matrix: dict | None = None,
    job_index: int | None = None,
    job_total: int | None = None,
    run_index: int = 0,
) -> dict:
    """A GitHub Actions runPart: runPartId is the job, or ``job-<matrix>-<strategy>`` for a matrix
    job, then the ``{"executor", "run-index"}`` suffix; its metadata holds all of those keys."""
    part_id, metadata = job, {}
    if matrix is not None:
        strategy = {"job-index": job_index, "job-total": job_total}
        part_id = f"{job}-{_json(matrix)}-{_json(strategy)}"
        metadata.update(matrix)
        metadata.update(strategy)
    suffix = {"executor": executor, "run-index": run_index}
    metadata.update(suffix)
    return {"runId": run_id, "runPartId": f"{part_id}-{_json(suffix)}", "jobName": job, "metadata": metadata}


def gitlab_run_part(job_id: str, job_name: str, executor: str, run_index: int = 0) -> dict:
    """GitLab: the JOB's id and name (``CI_JOB_ID``, ``CI_JOB_NAME``), then the same suffix."""
    suffix = {"executor": executor, "run-index": run_index}
    return {"runId": job_id, "runPartId": f"{job_name}-{_json(suffix)}", "jobName": job_name, "metadata": suffix}


def gitlab_metadata(archive: bytes, job_id: str, job_name: str, *, executor: str = "valgrind", **fields) -> dict:
    """A GitLab CodSpeed runner job's metadata (version 10): its run part and glData named by the
    job's id and name (``CI_JOB_ID``, ``CI_JOB_NAME``); ``fields`` as ``metadata`` takes them."""
    return metadata(
        archive,
        executor=executor,
        run_part=gitlab_run_part(job_id, job_name, executor),
        provider="GITLAB",
        environment="GITLAB_CI",
        gl_data={"runId": job_id, "job": job_name},
        **fields,
    )


def circleci_run_part(
    workflow_id: str, job: str, executor: str, *, node_index: int, node_total: int, run_index: int = 0
) -> dict:
    """CircleCI (the runner after 5.0.2): the workflow (``CIRCLE_WORKFLOW_ID``) is the run, each node
    of a job's parallelism a part ``{job}-{node}``, then the same suffix; its metadata holds the node's
    index and the job's node count."""
    suffix = {"executor": executor, "run-index": run_index}
    return {
        "runId": workflow_id,
        "runPartId": f"{job}-{node_index}-{_json(suffix)}",
        "jobName": job,
        "metadata": {"node-index": node_index, "node-total": node_total, **suffix},
    }


def metadata(  # noqa: PLR0913 -- each field of the runner's metadata, a keyword
    archive: bytes,
    *,
    executor: str,
    owner: str,
    repository: str,
    commit: str,
    run_part: dict | None,
    provider: str = "GITHUB",
    environment: str = "GITHUB_ACTIONS",
    ref: str = "refs/heads/main",
    head_ref: str | None = None,
    base_ref: str | None = None,
    event: str = "push",
    tokenless: bool = False,
    gh_data: dict | None = None,
    gl_data: dict | None = None,
    version: int = 10,
) -> dict:
    """Metadata version 10, fields in the runner's order; absent values are null. Version 11 (the
    runner after 5.0.2) drops ghData and glData."""
    gzipped = archive[:2] == b"\x1f\x8b"
    sent = {
        "repositoryProvider": provider,
        "version": version,
        "tokenless": tokenless,
        "profileMd5": md5_b64(archive),
        "profileEncoding": "gzip" if gzipped else None,
        "runner": {
            "name": "codspeed-runner",
            "version": RUNNER_VERSION,
            "instruments": [],
            "executor": executor,
            **MACHINE,
        },
        "runEnvironment": environment,
        "runPart": run_part,
        "commitHash": commit,
        "allowEmpty": False,
        "ref": ref,
        "headRef": head_ref,
        "baseRef": base_ref,
        "owner": owner,
        "repository": repository,
        "event": event,
        "sender": {"id": "1234567", "login": "octocat"} if provider == "GITHUB" else None,
        "ghData": gh_data
        if gh_data is not None
        else (
            {"runId": run_part["runId"], "job": run_part["jobName"]}
            if run_part and environment == "GITHUB_ACTIONS"
            else None
        ),
        "glData": gl_data,
        "localData": None,
        "repositoryRootPath": f"/home/runner/work/{repository}/{repository}/",
    }
    if version >= 11:
        del sent["ghData"], sent["glData"]
    return sent


def github_job(project: str, run_id: str, archive: bytes, commit: str, **fields) -> dict:
    """The metadata of GitHub Actions job ``bench`` of workflow run ``run_id`` (valgrind), as the runner
    POSTs it; ``fields``: the rest of ``metadata``'s keywords (a pull request's ref, head and base, …)."""
    owner, repository = project.rsplit("/", 1)
    return metadata(
        archive,
        executor="valgrind",
        owner=owner,
        repository=repository,
        commit=commit,
        run_part=github_run_part(run_id, "bench", "valgrind"),
        **fields,
    )


def upload(api_url: str, up: Upload, upload_url: str | None = None) -> Upload:
    """POST the metadata, then PUT the archive to the answered uploadUrl, as the runner does."""
    headers = {"Content-Type": "application/json", "User-Agent": "codspeed-runner"}  # exactly (src/request_client.rs)
    if up.token:
        headers["Authorization"] = up.token  # bare, no "Bearer"; absent when the job has no token
    up.body = body_of(up.metadata)
    up.post = requests.post(upload_url or f"{api_url}/upload", data=up.body, headers=headers, timeout=30)
    if up.post.status_code != 200:
        return up
    put_headers = {
        "Content-Type": "application/x-tar",
        "Content-Length": str(len(up.archive)),
        "Content-MD5": up.metadata["profileMd5"],
    }
    if up.metadata["profileEncoding"] == "gzip":
        put_headers["Content-Encoding"] = "gzip"
    up.headers = put_headers
    up.put = requests.put(up.post.json()["uploadUrl"], data=up.archive, headers=put_headers, timeout=30)
    return up


def folder_archive(files: dict[str, bytes], gzipped: bool) -> bytes:
    """A profile folder packed as the runner packs it: a ``.`` root entry, ``./<path>`` members,
    GNU headers; gzip for valgrind, a plain tar for walltime and memory."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz" if gzipped else "w", format=tarfile.GNU_FORMAT) as tar:
        folders = sorted({str(Path(p).parent) for p in files} - {"."})
        for name in [".", *folders]:
            info = tarfile.TarInfo("." if name == "." else f"./{name}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"./{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def walltime_folder(pid: int, benchmark: str) -> dict[str, bytes]:
    """What a walltime profile folder holds (pytest-codspeed's results, perf's data and maps)."""
    results = {
        "creator": {"name": "pytest-codspeed", "version": "5.0.4", "pid": pid},
        "instrument": {"type": "walltime"},
        "benchmarks": [{"name": benchmark, "uri": benchmark, "stats": {"mean_ns": 1200.5, "stdev_ns": 13.2}}],
    }
    return {
        f"results/{pid}.json": json.dumps(results, indent=2).encode(),
        "results/.gitignore": b"*\n",
        "perf.pipedata": b"PERFILE2" + bytes(range(256)) * 8,
        "perf.metadata": b'{"version": 1}',
        f"jit-{pid}.dump": b"JiTD" + bytes(60),
        f"{pid}_7f3a2c000000_7f3a2c400000_0.unwind_data": bytes(range(64)),
        f"perf-{pid}.map": f"7f3a2c001000 40 {benchmark}\n".encode(),
    }


def memory_folder(pid: int) -> dict[str, bytes]:
    return {
        f"results/{pid}.MemtrackArtifact.msgpack": b"\x82\xa3pid\xcd"
        + pid.to_bytes(2, "big")
        + b"\xa6allocs\x93\x01\x02\x03",
        "results/ExecutionTimestamps.msgpack": b"\x91\x92\xce\x00\x00\x00\x01\xce\x00\x00\x00\x02",
    }


def recorded(shard: int) -> bytes:
    """A real pytest-codspeed valgrind profile folder, packed by the runner's rules (tests/fixtures)."""
    return (FIXTURES / f"valgrind-shard-{shard}.tar.gz").read_bytes()


def recorded_walltime() -> bytes:
    return (FIXTURES / "walltime-shard-1.tar").read_bytes()


def valgrind_folder(pid: int, benchmarks: list[str]) -> dict[str, bytes]:
    """A valgrind profile folder of ``benchmarks`` (for workflows needing more distinct benchmarks
    than the recorded folders hold): callgrind parts as pytest-codspeed's, the runner's logs."""
    from codspeed_local.profiles import callgrind_text

    return {
        f"{pid}.out": callgrind_text(pid, benchmarks, 5).encode(),
        f"valgrind.{pid}.log": f"=={pid}== Callgrind, a call-graph generating cache profiler\n".encode(),
        f"perf-{pid}.map": f"7f3a2c001000 40 {benchmarks[0]}\n".encode(),
        "runner.log": b"INFO codspeed-runner: benchmarks ran under valgrind\n",
    }
