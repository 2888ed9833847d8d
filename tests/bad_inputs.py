"""Bad input, kind by kind: each must be refused with a status or reason that names the
problem, and leave the rest of the run as it was. Shared by tests and bench/load.py."""

import gzip
import io
import tarfile
import uuid
from dataclasses import dataclass

import requests

from codspeed_local.profiles import callgrind_text
from codspeed_rules.runner_json import compact
from tests.factories import bundle, md5_b64, metadata, restated, tar_gz, upload_request


def _special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def _out(pid: int = 1) -> bytes:
    return callgrind_text(pid, ["t::b"]).encode()


def _bomb() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=9) as tar:
        for name, data in (("./1.out", _out()), ("./zeros.bin", bytes(100 << 20))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


# (name, bytes of the bundle, what the reason must say)
BUNDLES = [
    ("member with ..", lambda: tar_gz({"./../escape.out": _out()}), "points outside the profile folder"),
    ("absolute member path", lambda: tar_gz({"/etc/cron.d/x": b"x", "./1.out": _out()}), "absolute path"),
    (
        "symlink out of the folder",
        lambda: tar_gz({"./1.out": _out(), "./l": _special("./l", tarfile.SYMTYPE, "/etc/passwd")}),
        "is a symlink",
    ),
    (
        "hard link out of the folder",
        lambda: tar_gz({"./1.out": _out(), "./h": _special("./h", tarfile.LNKTYPE, "../x")}),
        "is a hard link",
    ),
    (
        "character device",
        lambda: tar_gz({"./1.out": _out(), "./d": _special("./d", tarfile.CHRTYPE)}),
        "device or special file",
    ),
    (
        "block device",
        lambda: tar_gz({"./1.out": _out(), "./b": _special("./b", tarfile.BLKTYPE)}),
        "device or special file",
    ),
    ("fifo", lambda: tar_gz({"./1.out": _out(), "./f": _special("./f", tarfile.FIFOTYPE)}), "device or special file"),
    ("gzip bomb", _bomb, "refused as a gzip bomb"),
    ("truncated gzip", lambda: bundle()[:-40], "truncated or corrupt"),
    (
        "tar inside the tar",
        lambda: tar_gz({"./inner.tar.gz": bundle(), "./1.out": _out()}),
        "archive inside the archive",
    ),
    ("empty archive", lambda: tar_gz({}), "empty archive"),
    ("empty file (size differs from the declared one)", lambda: b"", "the bundle is 0 bytes but 1 were declared"),
    ("no .out file", lambda: tar_gz({"./runner.log": b"log"}), "no <pid>.out callgrind file"),
    (
        ".out without pid header",
        lambda: tar_gz({"./12.out": b"# callgrind format\nversion: 1\ncmd: x\n"}),
        "no 'pid:' header line",
    ),
    (".out whose pid is not its name", lambda: tar_gz({"./12.out": _out(13)}), "declares 'pid: 13'"),
    (".out that is not callgrind", lambda: tar_gz({"./12.out": b"hello\npid: 12\n"}), "is not a callgrind file"),
    ("not gzip", lambda: b"PK\x03\x04 a zip, not a tar.gz", "neither gzip-compressed nor a tar archive"),
    ("gzip of something not tar", lambda: gzip.compress(b"plain text" * 100), "gzip but not a tar archive"),
    ("control character in a name", lambda: tar_gz({"./a\x07.out": _out()}), "control character"),
    ("backslash in a name", lambda: tar_gz({"./..\\..\\x.out": _out()}), "backslash"),
    (".out twice", lambda: tar_gz({"./1.out": _out(), "1.out": _out()}), "appears twice"),
]


# (name, request, status, what the error must say)
def _req(**change):
    return lambda project, run_id: {"json": {**upload_request(project, run_id, "2", b"data", total=2), **change}}


def _without(request: dict, *fields: str) -> dict:
    """An upload request whose metadata (and its body, which says the same) lacks ``fields``."""
    meta = {k: v for k, v in request["metadata"].items() if k not in fields}
    return {**request, "metadata": meta, "metadata_body": compact(meta).decode()}


def _meta(**change):
    meta = metadata(md5_b64(b"data"), **change)
    return meta


REQUESTS = [
    ("shard name with /", "POST", "/v1/uploads", _req(shard="a/b"), 422, "shard"),
    ("shard name ..", "POST", "/v1/uploads", _req(shard=".."), 422, "shard"),
    ("shard name with control characters", "POST", "/v1/uploads", _req(shard="a\x00b"), 422, "shard"),
    ("shard name of 500 characters", "POST", "/v1/uploads", _req(shard="s" * 500), 422, "shard"),
    ("manifest count 0", "POST", "/v1/uploads", _req(total=0), 422, "total"),
    ("manifest count 10 000", "POST", "/v1/uploads", _req(total=10_000), 422, "total"),
    ("run id with odd characters", "POST", "/v1/uploads", _req(run_id="run;rm -rf /"), 422, "run_id"),
    ("run id with unicode", "POST", "/v1/uploads", _req(run_id="rün"), 422, "run_id"),
    ("bundle over the size limit", "POST", "/v1/uploads", _req(size=6 << 30), 422, "over the limit"),
    ("md5 not base64", "POST", "/v1/uploads", _req(md5="zz"), 422, "md5"),
    ("unknown field", "POST", "/v1/uploads", _req(force=True), 422, "force"),
    (
        "disagreeing manifest",
        "POST",
        "/v1/uploads",
        _req(total=3),
        409,
        "the run was opened expecting 2 shards; it keeps its first manifest",
    ),
    (
        "shard outside the manifest",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": upload_request(p, r, "9", b"data", total=2)},
        422,
        "not in the run's manifest",
    ),
    (
        "a pushed shard under another shard's part id",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": {**upload_request(p, r, "1", b"data", total=2), "shard": "2"}},
        422,
        "a pushed shard goes under the aggregator's own id for shard 2 (valgrind)",
    ),
    (
        "conflicting commit",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": upload_request(p, r, "2", b"data", total=2, commit="0" * 40)},
        409,
        "commitHash",
    ),
    ("metadata that is not JSON", "POST", "/upload", lambda p, r: {"data": "{commitHash: nope"}, 422, "not valid JSON"),
    (
        "metadata failing the schema",
        "POST",
        "/upload",
        lambda p, r: {"json": {**_meta(), "version": "ten"}},
        422,
        "version",
    ),
    (
        "drop-in metadata without profileMd5",
        "POST",
        "/upload",
        lambda p, r: {"json": {**_meta(owner=p.split("/")[0], repository=p.split("/")[1]), "profileMd5": None}},
        422,
        "metadata has no profileMd5",
    ),
    (
        "md5 without metadata.profileMd5",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": restated(upload_request(p, r, "2", b"data", total=2), profileMd5=None)},
        422,
        "metadata.profileMd5 differs from md5",
    ),
    (
        "no md5",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": {**upload_request(p, r, "2", b"data", total=2, checksum="crc32"), "md5": None}},
        422,
        "md5",
    ),
    (
        "crc32 not base64 of 4 bytes",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": upload_request(p, r, "2", b"data", total=2, checksum="crc32") | {"crc32": "zz"}},
        422,
        "crc32",
    ),
    (
        "runPart job-total below 1",
        "POST",
        "/upload",
        lambda p, r: {
            "json": _meta(
                owner=p.split("/")[0],
                repository=p.split("/")[1],
                run_part={"runId": r, "runPartId": "bench", "jobName": "bench", "metadata": {"job-total": -5}},
            )
        },
        422,
        "job-total is -5",
    ),
    (
        "runner runPartId of an aggregated part",
        "POST",
        "/upload",
        lambda p, r: {
            "json": _meta(
                owner=p.split("/")[0],
                repository=p.split("/")[1],
                run_part={
                    "runId": r,
                    "runPartId": 'bench-{"aggregated-part":1,"executor":"valgrind"}',
                    "jobName": "bench",
                    "metadata": {},
                },
            )
        },
        422,
        "names the aggregator's own run parts",
    ),
    (
        "runner runPartId of a pushed shard's part",
        "POST",
        "/upload",
        lambda p, r: {
            "json": _meta(
                owner=p.split("/")[0],
                repository=p.split("/")[1],
                run_part={
                    "runId": r,
                    "runPartId": 'codspeed-shard-aggregator-{"aggregated-shard":"1","executor":"valgrind"}',
                    "jobName": "bench",
                    "metadata": {},
                },
            )
        },
        422,
        "names the aggregator's own run parts",
    ),
    (
        "owner with a '..' segment",
        "POST",
        "/upload",
        lambda p, r: {"json": _meta(owner="..", repository=p.split("/")[1])},
        422,
        "owner: Value error, must not contain",
    ),
    (
        "metadata older than version 5",
        "POST",
        "/upload",
        lambda p, r: {"json": {**_meta(), "version": 4}},
        422,
        "version",
    ),
    (
        "a pushed shard's executor that is no executor's name",
        "POST",
        "/v1/uploads",
        lambda p, r: {
            "json": upload_request(
                p,
                r,
                "2",
                b"data",
                total=2,
                runner={"name": "codspeed-client", "version": "1.0.0", "instruments": [], "executor": "wall~time"},
            )
        },
        422,
        "is not an executor's name",
    ),
    (
        "oversized JSON body",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": {**upload_request(p, r, "2", b"data", total=2), "pad": "x" * 300_000}},
        413,
        "request body over",
    ),
    (
        "close skipping an unknown shard",
        "POST",
        "/v1/runs/close",
        lambda p, r: {"json": {"project": p, "run_id": r, "skip": ["7"]}},
        422,
        "cannot skip 7",
    ),
    ("report format unknown", "GET", None, lambda p, r: {"params": {"format": "xml"}}, 422, "format"),
    (
        "client metadata without owner and repository",
        "POST",
        "/v1/uploads",
        lambda p, r: {"json": _without(upload_request(p, r, "2", b"data", total=2), "owner", "repository")},
        422,
        "metadata has no owner and repository",
    ),
    ("a report of attempt '~'", "GET", lambda p, r: f"/v1/runs/{p}/{r}~", lambda p, r: {}, 422, "names no attempt"),
    (
        "a report of attempt '~1~2'",
        "GET",
        lambda p, r: f"/v1/runs/{p}/{r}~1~2",
        lambda p, r: {},
        422,
        "names attempt '1~2'",
    ),
    ("a report of attempt '~²'", "GET", lambda p, r: f"/v1/runs/{p}/{r}~\u00b2", lambda p, r: {}, 422, "names attempt"),
    ("a run page of attempt '~'", "GET", lambda p, r: f"/runs/{p}/{r}~", lambda p, r: {}, 422, "names no attempt"),
]


@dataclass
class Target:
    api_url: str
    token: str
    aggregator: object

    def call(self, method, path, **kwargs) -> requests.Response:
        return requests.request(
            method, f"{self.api_url}{path}", headers={"Authorization": self.token}, timeout=30, **kwargs
        )


def _run_with_one_shard(target: Target) -> tuple[str, str, dict]:
    project, run_id = f"acme/bad-{uuid.uuid4().hex[:6]}", f"bad-{uuid.uuid4().hex[:8]}"
    data = bundle(4242, ["t::good"])
    grant = target.call("POST", "/v1/uploads", json=upload_request(project, run_id, "1", data, total=2)).json()
    requests.put(grant["upload_url"], data=data, headers=grant["headers"], timeout=30).raise_for_status()
    target.aggregator.record_arrival.record(grant["key"], len(data))
    return project, run_id, _state(target, project, run_id)


def _state(target, project, run_id) -> dict:
    snapshot = target.aggregator.ledger.reads.snapshot(project, run_id)
    return {
        "run": (snapshot.run.state, snapshot.run.groups, snapshot.run.commit),
        "shard 1": (snapshot.shards["1"].state, snapshot.shards["1"].attempt, snapshot.shards["1"].upload_id),
    }


def refuse_bundle(target: Target, name: str) -> None:
    _, make, reason = next(c for c in BUNDLES if c[0] == name)
    project, run_id, before = _run_with_one_shard(target)
    data = make()
    grant = target.call("POST", "/v1/uploads", json=upload_request(project, run_id, "2", data or b"-", total=2)).json()
    requests.put(
        grant["upload_url"],
        data=data,
        timeout=60,
        headers={k: v for k, v in grant["headers"].items() if k != "Content-Length"},
    ).raise_for_status()
    target.aggregator.record_arrival.record(grant["key"], len(data))
    shard = target.aggregator.ledger.reads.snapshot(project, run_id).shards["2"]
    assert shard.state == "rejected" and reason in (shard.reason or ""), f"{name}: {shard}"
    assert _state(target, project, run_id) == before, f"{name}: the run changed"


def refuse_request(target: Target, name: str) -> None:
    _, method, path, make, status, says = next(c for c in REQUESTS if c[0] == name)
    project, run_id, before = _run_with_one_shard(target)
    path = path(project, run_id) if callable(path) else path
    answer = target.call(method, path or f"/v1/runs/{project}/{run_id}", **make(project, run_id))
    assert answer.status_code == status and says in answer.json()["error"], (
        f"{name}: {answer.status_code} {answer.text[:300]}"
    )
    snapshot = target.aggregator.ledger.reads.snapshot(project, run_id)
    assert _state(target, project, run_id) == before and "2" not in snapshot.shards, f"{name}: the run changed"


CASES = [(name, refuse_bundle) for name, _, _ in BUNDLES] + [(c[0], refuse_request) for c in REQUESTS]
