"""Bundles, metadata and uploads for tests: real tar.gz bytes, real presigned PUTs."""

import base64
import gzip
import hashlib
import io
import struct
import tarfile
import time
import zlib
from pathlib import Path

import requests

from codspeed_local.profiles import callgrind_text
from codspeed_rules.runner_json import compact, pushed_part_id

COMMIT = "5f1c2e3d4b5a69788796a5b4c3d2e1f0a9b8c7d6"


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def crc32_b64(data: bytes) -> str:
    """S3's x-amz-checksum-crc32: base64 of the big-endian CRC32."""
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def tar_gz(members: dict[str, bytes | tarfile.TarInfo]) -> bytes:
    """A tar.gz of the given members: bytes become regular files, TarInfos are added as they are."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, content in members.items():
            if isinstance(content, tarfile.TarInfo):
                tar.addfile(content)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(content)
                info.mtime = 1_700_000_000
                tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


def profile_members(
    pid: int, benchmarks: list[str], filler_lines: int = 5, costs: dict[str, int] | None = None
) -> dict[str, bytes]:
    return {
        f"./{pid}.out": callgrind_text(pid, benchmarks, filler_lines, costs=costs).encode(),
        f"./perf-{pid}.map": f"7f0000 10 fn_{pid}\n".encode(),
        f"./valgrind.{pid}.log": f"=={pid}== callgrind\n".encode(),
        f"./results/{pid}.json": f'{{"pid": {pid}}}\n'.encode(),
        "./runner.log": b"runner log\n",
    }


def bundle(pid: int = 4242, benchmarks: list[str] | None = None, **kwargs) -> bytes:
    return tar_gz(profile_members(pid, benchmarks or [f"tests/test_a.py::test_{pid}_{i}" for i in range(3)], **kwargs))


def packed(data: bytes, level: int = 6) -> bytes:
    """A bundle as ``codspeed-client pack`` writes it: normalized, and marked as such."""
    from codspeed_rules.normalize import Normalizer

    out = io.BytesIO()
    normalizer = Normalizer(out, level=level)
    normalizer.feed(gzip.decompress(data))
    normalizer.close()
    return out.getvalue()


def marked_uncut(data: bytes) -> bytes:
    """A bundle marked as normalized whose deflate stream is not cut at all."""
    from codspeed_rules.normalize import NORMALIZED_HEADER

    tar = gzip.decompress(data)
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    return NORMALIZED_HEADER + comp.compress(tar) + comp.flush() + struct.pack("<II", zlib.crc32(tar), len(tar))


def metadata(
    md5: str,
    *,
    owner: str = "acme",
    repository: str = "widgets",
    commit: str = COMMIT,
    run_part: dict | None = None,
    **extra,
) -> dict:
    meta = {
        "repositoryProvider": "GITHUB",
        "version": 10,
        "tokenless": False,
        "profileMd5": md5,
        "runner": {"name": "codspeed-runner", "version": "5.0.2", "instruments": [], "executor": "valgrind"},
        "runEnvironment": "GITHUB_ACTIONS",
        "commitHash": commit,
        "ref": "refs/heads/main",
        "owner": owner,
        "repository": repository,
        "event": "push",
        "ghData": {"runId": "7044765741", "job": "bench"},
        "repositoryRootPath": "/home/runner/work/widgets/",
    }
    if run_part is not None:
        meta["runPart"] = run_part
    meta.update(extra)
    return meta


def upload_request(  # noqa: PLR0913 -- each field of an upload request, a keyword
    project: str,
    run_id: str,
    shard: str,
    data: bytes,
    *,
    total: int | None = None,
    expect: list[str] | None = None,
    checksum: str = "md5",
    base_commit: str | None = None,
    base_ancestors: list[str] | None = None,
    ci_run: str | None = None,
    ci_attempt: int | None = None,
    **meta_extra,
) -> dict:
    """As codspeed-client asks: the bundle's MD5 (CodSpeed's profileMd5), with ``checksum="crc32"`` its
    CRC32 too; the metadata names the run part as the client's does (the aggregator's run, its own id for
    the shard) and goes as ``metadata_body`` too, the bytes upstream."""
    owner, repository = project.rsplit("/", 1)
    md5 = md5_b64(data)
    executor = (meta_extra.get("runner") or {}).get("executor", "valgrind")
    part = {"runId": run_id.partition("~")[0], "runPartId": pushed_part_id(shard, executor), "jobName": "bench"}
    meta_extra.setdefault("run_part", {**part, "metadata": {"executor": executor, "run-index": 0}})
    meta = metadata(md5, owner=owner, repository=repository, **meta_extra)
    request = {
        "project": project,
        "run_id": run_id,
        "shard": shard,
        "size": len(data),
        "md5": md5,
        "metadata": meta,
        "metadata_body": compact(meta).decode(),
    }
    if checksum == "crc32":
        request["crc32"] = crc32_b64(data)
    if total is not None:
        request["total"] = total
    if expect is not None:
        request["expect"] = expect
    if base_commit is not None:
        request["base_commit"] = base_commit
    if base_ancestors is not None:
        request["base_ancestors"] = base_ancestors
    if ci_run is not None:  # the CI run (and attempt) the job is in: a close from it says the job ended
        request["ci_run"] = ci_run
    if ci_attempt is not None:
        request["ci_attempt"] = ci_attempt
    return request


def restated(request: dict, **metadata_fields) -> dict:
    """An upload request with its metadata changed, its body (the bytes upstream) saying the same."""
    meta = {**request["metadata"], **metadata_fields}
    return {**request, "metadata": meta, "metadata_body": compact(meta).decode()}


def put(grant: dict, data: bytes) -> requests.Response:
    """PUT a bundle the way the client does: to the presigned URL, with every signed header."""
    answer = requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30)
    answer.raise_for_status()
    return answer


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


class Clock:
    """An aggregator's clock, moved by hand (``replace(aggregator, clock=Clock())``): an upload URL's
    expiry, a deadline or a lease without the wait."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def pull_request_checkout(repo: Path) -> dict[str, str]:
    """A clone as a pull request's CI job has it: main's tip (``base``), the pull request's head on
    ``feature`` (``head``), and GitHub's merge commit of the head into main (``merge``), checked out
    detached as actions/checkout leaves ``refs/pull/N/merge``."""
    import subprocess

    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    base = git_commit(repo, "main")
    subprocess.run([*git, "checkout", "-q", "-b", "feature"], check=True)
    head = git_commit(repo, "feature")
    subprocess.run([*git, "checkout", "-q", "--detach", base], check=True)
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", "Merge", head], check=True)
    merge = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"base": base, "head": head, "merge": merge}


def past_the_barrier(agg):
    """``agg`` with its clock past every upload URL granted until now: its close no longer waits for an
    upload whose bundle is not in the bucket (one PUT after that counts late, in the run's next attempt)."""
    from dataclasses import replace

    later = time.time() + agg.settings.presign_expiry_seconds + 1
    return replace(agg, clock=lambda: later)


def grant(agg, project: str, run_id: str, shard: str, data: bytes, **kwargs) -> dict:
    """An upload granted (the job's request answered), its bundle not sent: the grant, as JSON."""
    from codspeed_wire.api import ShardUploadRequest

    request = ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs))
    return agg.request_upload.grant(request).model_dump()


def push(agg, project: str, run_id: str, shard: str, data: bytes, **kwargs) -> dict:
    """Grant an upload through the use case and PUT the bundle to its URL: the grant, as JSON."""
    from codspeed_wire.api import ShardUploadRequest

    grant = agg.request_upload.grant(
        ShardUploadRequest.model_validate(upload_request(project, run_id, shard, data, **kwargs))
    )
    put(grant.model_dump(), data)
    return grant.model_dump()


def segment_ends(tar: bytes) -> list[int]:
    """Where a normalizer cuts ``tar`` (the end of each of its segments), or none when it cannot."""
    from codspeed_rules.normalize import Normalizer

    normalizer = Normalizer(io.BytesIO())
    normalizer.feed(tar)
    index = normalizer.close()
    ends, at = [], 0
    for member in index.members if index else []:
        for segment in member.segments:
            at += segment.unpacked
            ends.append(at)
    return ends


def arrival(bundle: bytes):
    """What an arrival makes of a bundle, as record_arrival does: (pids, index, the object to
    splice): the bundle itself when it verifies, else a normalized copy of it."""
    from codspeed_aggregator.domain.bundle import normalizing, validate_bundle
    from codspeed_rules.verify import NotNormalized

    try:
        reading = normalizing(None)
        summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
        if reading.verifier is not None:
            return summary.pids, reading.close(summary.listing), bundle
    except NotNormalized:
        pass
    out = io.BytesIO()
    reading = normalizing(out, verify=False)
    summary = validate_bundle(io.BytesIO(bundle), gunzip=reading.gunzip, tap=reading.tap)
    return summary.pids, reading.close(summary.listing), out.getvalue()


def git_commit(repo, message: str) -> str:
    """An empty commit in ``repo``; answers its SHA."""
    import subprocess

    git = ["git", "-C", str(repo), "-c", "user.email=ci@example.com", "-c", "user.name=ci"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def footprint(stack, project: str, run_id: str) -> dict:
    """Everything the stack holds of a run, its attempts included: every item of its partitions (one
    per attempt, all attributes) and every version of every object under it, to hold a refusal to
    changing nothing. Read by key and prefix, never a scan: the state machine takes it at every step."""
    from codspeed_aggregator.adapters import aws
    from codspeed_aggregator.adapters.ledger.codec import run_pk
    from codspeed_aggregator.domain.attempts import attempt_run_id
    from codspeed_aggregator.domain.keys import project_segment

    base, db, s3 = run_id.split("~", 1)[0], aws.client("dynamodb"), aws.client("s3")
    items = []
    for attempt in range(1, 22):  # attempts are opened one after another: the first empty one ends them
        pages = db.get_paginator("query").paginate(
            TableName=stack.resources.table,
            KeyConditionExpression="pk = :pk",
            ConsistentRead=True,
            ExpressionAttributeValues={":pk": {"S": run_pk(project, attempt_run_id(base, attempt))}},
        )
        found = [repr(sorted(item.items())) for page in pages for item in page["Items"]]
        if not found and attempt > 1:
            break
        items += found
    tops = [
        p["Prefix"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=stack.resources.bucket, Delimiter="/")
        for p in page.get("CommonPrefixes", [])
    ]
    objects = []
    for top in tops:
        for page in s3.get_paginator("list_object_versions").paginate(
            Bucket=stack.resources.bucket, Prefix=f"{top}{project_segment(project)}/{base}"
        ):
            objects += [
                (v["Key"], v["VersionId"], v.get("ETag"))
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
    return {"items": sorted(items), "objects": sorted(objects)}
