"""The client against a scripted server on loopback: retries, an expired upload URL, no retry on 4xx."""

import io
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codspeed_client import errors
from codspeed_client.api import AggregatorApi
from codspeed_client.cli import main
from codspeed_client.errors import ClientError
from codspeed_client.progress import Progress
from codspeed_local.serving import serve_in_thread, stop_serving
from codspeed_rules.runner_json import compact, pushed_part_id
from codspeed_wire.api import ShardUploadRequest
from tests.factories import bundle, crc32_b64, md5_b64, profile_members, tar_gz


class _QuietServer(ThreadingHTTPServer):
    """A client that stops sending mid-body (a push it found would be refused) resets the
    connection: expected here, and not printed into the output a test checks."""

    def handle_error(self, request, client_address) -> None:
        pass


class Scripted:
    """Answers each (method, path prefix) from a script of (status, body, headers); records every request."""

    def __init__(self, script: dict[tuple[str, str], list[tuple[int, dict | str, dict]]]) -> None:
        self.script = script
        self.seen: list[tuple[str, str]] = []
        self.received: list[tuple[str, dict, bytes]] = []  # (path, headers, body) of each request
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                outer.seen.append((self.command, self.path))
                outer.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                key = next(k for k in outer.script if k[0] == self.command and self.path.startswith(k[1]))
                status, body, headers = outer.script[key].pop(0) if len(outer.script[key]) > 1 else outer.script[key][0]
                raw = (json.dumps(body) if isinstance(body, dict) else body).replace("{url}", outer.url).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "application/xml")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PUT = _serve

            def log_message(self, *args) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, method: str, prefix: str) -> int:
        return sum(m == method and p.startswith(prefix) for m, p in self.seen)


@pytest.fixture
def scripted():
    servers = []

    def make(script):
        servers.append(Scripted(script))
        return servers[-1]

    yield make
    for s in servers:
        stop_serving(s.server)


REPORT = {
    "project": "a/b",
    "run_id": "1",
    "state": "open",
    "partial": True,
    "version": 1,
    "expected": 2,
    "arrived": 0,
    "shards": [],
}


@pytest.fixture(autouse=True)
def outside_any_checkout(tmp_path, monkeypatch):
    """The client reads the job's commit from the checkout it runs in, as the runner does: these tests
    run where there is none (never this repository's own)."""
    away = tmp_path / "elsewhere"
    away.mkdir()
    monkeypatch.chdir(away)


def test_5xx_and_429_are_retried_with_growing_jittered_backoff(scripted):
    server = scripted(
        {
            ("GET", "/v1/runs"): [
                (503, {"error": "busy"}, {}),
                (500, {"error": "oops"}, {}),
                (429, {"error": "slow down"}, {"Retry-After": "2"}),
                (200, REPORT, {}),
            ]
        }
    )
    delays = []
    api = AggregatorApi(server.url, "t", backoff=1.0, sleep=delays.append)
    assert api.report("a/b", "1") == REPORT
    assert server.count("GET", "/v1/runs") == 4
    assert 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0 and delays[2] == 2.0  # Retry-After wins


def test_a_4xx_is_never_retried(scripted):
    server = scripted({("POST", "/v1/runs/close"): [(422, {"error": "cannot skip 9"}, {})]})
    with pytest.raises(ClientError, match=r"refused the request \(422\): cannot skip 9") as caught:
        AggregatorApi(server.url, "t", sleep=lambda s: None).close("a/b", "1", ["9"])
    assert caught.value.exit_code == errors.REFUSED and server.count("POST", "/v1/runs/close") == 1


def test_connection_errors_are_retried_then_reported_in_one_sentence():
    delays = []
    with pytest.raises(
        ClientError, match=r"cannot reach the aggregator at http://127.0.0.1:9 \(ConnectionError\) after 3 tries"
    ) as caught:
        AggregatorApi("http://127.0.0.1:9", "t", attempts=3, sleep=delays.append).report("a/b", "1")
    assert caught.value.exit_code == errors.NETWORK and len(delays) == 2


def test_an_expired_upload_url_gets_a_new_one(scripted, tmp_path, capsys):
    grant = {
        "upload_url": "{url}/put/bundle",
        "headers": {"Content-MD5": "x"},
        "key": "k",
        "upload_id": "u",
        "expires_in": 1,
    }
    expired = "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"
    server = scripted(
        {("POST", "/v1/uploads"): [(201, grant, {})], ("PUT", "/put/"): [(403, expired, {}), (200, "", {})]}
    )
    archive = tmp_path / "shard.tar.gz"
    archive.write_bytes(bundle())
    code = main(
        [
            "push",
            "--shard",
            "1/2",
            "--archive",
            str(archive),
            "--api-url",
            server.url,
            "--token",
            "t",
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
            "--quiet",
        ]
    )
    assert code == 0 and capsys.readouterr().out == ""  # --quiet
    assert server.count("POST", "/v1/uploads") == 2 and server.count("PUT", "/put/") == 2


def _push(server, source: list[str], *extra) -> int:
    return main(
        [
            "push",
            "--shard",
            "1/2",
            *source,
            "--api-url",
            server.url,
            "--token",
            "t",
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
            "--quiet",
            *extra,
        ]
    )


def _grant(headers: dict) -> dict:
    return {"upload_url": "{url}/put/bundle", "headers": headers, "key": "k", "upload_id": "u", "expires_in": 900}


@pytest.mark.parametrize("source", ["archive", "folder"])
def test_the_upload_is_asked_for_with_the_bundles_crc32_and_carries_it(scripted, tmp_path, source):
    from codspeed_local.profiles import make_profile_folder

    if source == "archive":
        archive = tmp_path / "shard.tar.gz"
        archive.write_bytes(tar_gz({**profile_members(321, ["t::one"]), "./blob.bin": os.urandom(3 << 20)}))
        args = ["--archive", str(archive)]
    else:
        args = ["--profile-folder", str(make_profile_folder(tmp_path / "p", 321, ["t::one"]))]
    server = scripted(
        {
            ("POST", "/v1/uploads"): [(201, _grant({"x-amz-checksum-crc32": "signed-value"}), {})],
            ("PUT", "/put/"): [(200, "", {})],
        }
    )
    assert _push(server, args) == 0
    [(_, _, asked), (_, put_headers, put_body)] = server.received
    request = json.loads(asked)
    assert ShardUploadRequest.model_validate(request).crc32 == crc32_b64(put_body)  # the API's own contract
    # its MD5 too, taken in the same pass: CodSpeed's profileMd5, naming the archive as pushed
    assert request["md5"] == request["metadata"]["profileMd5"] == md5_b64(put_body)
    assert request["metadata_body"].encode() == compact(request["metadata"])  # the runner's compact bytes
    assert put_headers["x-amz-checksum-crc32"] == "signed-value" and put_headers["content-length"] == str(len(put_body))
    if source == "archive":
        assert put_body == archive.read_bytes()


def test_bytes_that_fail_the_checksum_are_one_sentence_and_exit_6(scripted, tmp_path, capsys):
    archive = tmp_path / "shard.tar.gz"
    archive.write_bytes(bundle())
    bad_digest = (
        "<Error><Code>BadDigest</Code><Message>The CRC32 you specified did not match the calculated checksum."
        "</Message></Error>"
    )
    server = scripted({("POST", "/v1/uploads"): [(201, _grant({}), {})], ("PUT", "/put/"): [(400, bad_digest, {})]})
    assert _push(server, ["--archive", str(archive)], "--json") == errors.NETWORK
    out, err = capsys.readouterr()
    assert f"the bundle store received other bytes than {archive} held when its checksum was taken" in err
    assert "Traceback" not in err and json.loads(out)["exit_code"] == errors.NETWORK
    assert server.count("PUT", "/put/") == 1  # a 4xx is not retried


def test_a_wrong_token_is_exit_4_in_one_sentence_and_json_on_request(scripted, capsys):
    server = scripted(
        {("POST", "/v1/runs/close"): [(403, {"error": "the token is not valid for this aggregator"}, {})]}
    )
    code = main(["close", "--api-url", server.url, "--token", "bad", "--project", "a/b", "--run-id", "1", "--json"])
    captured = capsys.readouterr()
    assert code == errors.AUTH
    assert captured.err.strip() == (
        "codspeed-client: error: the aggregator refused the token (403): "
        "the token is not valid for this aggregator; check CODSPEED_AGGREGATOR_TOKEN"
    )
    assert json.loads(captured.out) == {
        "error": captured.err.strip().removeprefix("codspeed-client: error: "),
        "exit_code": 4,
    }


@pytest.mark.slow
def test_an_unreadable_archive_is_exit_7(tmp_path, capsys):
    archive = tmp_path / "broken.tar.gz"
    archive.write_bytes(b"not an archive")
    code = main(
        [
            "push",
            "--shard",
            "1/2",
            "--archive",
            str(archive),
            "--api-url",
            "http://127.0.0.1:9",
            "--token",
            "t",
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
        ]
    )
    err = capsys.readouterr().err
    assert code == errors.INPUT and "Traceback" not in err
    assert (
        f"{archive} would be refused by the aggregator: the bundle is neither gzip-compressed nor a tar archive" in err
    )
    archive.write_bytes(__import__("gzip").compress(b"gzip, but no tar inside" * 50))
    assert (
        main(
            [
                "push",
                "--shard",
                "1/2",
                "--archive",
                str(archive),
                "--project",
                "a/b",
                "--run-id",
                "1",
                "--commit",
                "a" * 40,
                "--dry-run",
            ]
        )
        == errors.INPUT
    )


def test_a_shard_the_aggregator_would_refuse_is_stopped_at_the_push(scripted, tmp_path, capsys):
    members = profile_members(321, ["t::one"])
    members["./321.out"] = b"# callgrind format\nversion: 1\ncmd: no pid line\n"
    archive = tmp_path / "shard.tar.gz"
    archive.write_bytes(tar_gz({**members, "./blob.bin": os.urandom(8 << 20)}))
    server = scripted({("POST", "/v1/uploads"): [(201, _grant({}), {})], ("PUT", "/put/"): [(200, "", {})]})
    assert _push(server, ["--archive", str(archive)]) == errors.INPUT
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"codspeed-client: error: {archive} would be refused by the aggregator: 321.out has no 'pid:' header line"
    )
    dry = main(
        [
            "push",
            "--shard",
            "1/2",
            "--archive",
            str(archive),
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
            "--dry-run",
        ]
    )
    assert dry == errors.INPUT and "321.out has no 'pid:' header line" in capsys.readouterr().err


def test_an_archive_emptied_before_its_checksum_is_taken_is_exit_7_and_nothing_is_sent(
    scripted, tmp_path, monkeypatch, capsys
):
    from codspeed_client import bundle as client_bundle

    archive = tmp_path / "shard.tar.gz"
    archive.write_bytes(bundle())
    take = client_bundle._checksums_meanwhile

    def emptied_first(path):
        path.write_bytes(b"")
        return take(path)

    monkeypatch.setattr(client_bundle, "_checksums_meanwhile", emptied_first)
    server = scripted({("POST", "/v1/uploads"): [(201, _grant({}), {})], ("PUT", "/put/"): [(200, "", {})]})
    assert _push(server, ["--archive", str(archive)]) == errors.INPUT
    err = capsys.readouterr().err
    assert f"cannot read archive {archive} (cannot mmap an empty file)" in err and "Traceback" not in err
    assert server.seen == []


def test_dry_run_shows_what_would_be_sent_and_sends_nothing(tmp_path, capsys):
    from codspeed_local.profiles import make_profile_folder

    folder = make_profile_folder(tmp_path / "p", 321, ["t::one", "t::two"])
    code = main(
        [
            "push",
            "--shard",
            "1/2",
            "--profile-folder",
            str(folder),
            "--project",
            "a/b",
            "--run-id",
            "1",
            "--commit",
            "a" * 40,
            "--dry-run",
            "--json",
        ]
    )
    shown = json.loads(capsys.readouterr().out)
    assert code == 0 and shown["benchmarks"] == 2 and "321.out" in shown["files"]
    assert shown["request"]["metadata"]["runPart"]["runPartId"] == pushed_part_id("1", "valgrind")
    assert shown["request"]["total"] == 2


def test_progress_is_live_on_a_terminal_and_silent_otherwise():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    live, quiet = Tty(), io.StringIO()
    for stream in (live, quiet):
        progress = Progress(4 << 20, stream=stream, interval=0)
        body = progress.wrap(io.BytesIO(b"x" * (4 << 20)))
        while body.read(1 << 20):
            pass
    assert "uploading 4.0 MiB / 4.0 MiB" in live.getvalue() and quiet.getvalue() == ""


def test_env_prints_what_was_detected_and_flags_win(monkeypatch, capsys):
    for key, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/widgets",
        "GITHUB_RUN_ID": "77",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_SHA": "1" * 40,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_JOB": "bench",
        "GITHUB_EVENT_NAME": "push",
    }.items():
        monkeypatch.setenv(key, value)
    assert main(["env", "--json", "--run-id", "override"]) == 0
    detected = json.loads(capsys.readouterr().out)
    assert detected["provider"] == "GITHUB_ACTIONS" and detected["project"] == "acme/widgets"
    assert detected["run_id"] == "override" and detected["commit"] == "1" * 40 and detected["job"] == "bench"


def test_a_push_in_a_ci_re_run_says_which_attempt_it_belongs_to(scripted, tmp_path, monkeypatch):
    """GitHub raises GITHUB_RUN_ATTEMPT at every kind of re-run: the aggregator joins every shard of
    one CI attempt into one attempt of the run (the upload request's own contract)."""
    from codspeed_local.profiles import make_profile_folder

    folder = make_profile_folder(tmp_path / "p", 321, ["t::one"])
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    for attempt, said in (("3", 3), ("", None)):
        monkeypatch.setenv("GITHUB_RUN_ATTEMPT", attempt)
        server = scripted({("POST", "/v1/uploads"): [(201, _grant({}), {})], ("PUT", "/put/"): [(200, "", {})]})
        assert _push(server, ["--profile-folder", str(folder)]) == 0
        request = json.loads(server.received[0][2])
        assert ShardUploadRequest.model_validate(request).ci_attempt == said


def test_a_tokenless_push_prints_the_run_hash_of_the_bytes_it_sends_as_the_runner_does(
    scripted, tmp_path, monkeypatch, capsys
):
    """A fork's pull request pushes without a token: the client prints "CodSpeed Run Hash", the sha256 of
    the metadata's bytes, which are what goes upstream as they are (``metadata_body``)."""
    import hashlib

    from codspeed_local.profiles import make_profile_folder

    folder = make_profile_folder(tmp_path / "p", 321, ["t::one"])
    event = tmp_path / "event.json"
    fork = {"id": 2, "full_name": "someone/b", "owner": {"login": "someone"}}
    base = {"id": 1, "full_name": "a/b", "owner": {"login": "a"}}
    event.write_text(
        json.dumps({"pull_request": {"head": {"sha": "9" * 40, "ref": "f", "repo": fork}, "base": {"repo": base}}})
    )
    for name, value in {
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "a/b",
        "GITHUB_RUN_ID": "1",
        "GITHUB_REF": "refs/pull/3/merge",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "CODSPEED_AGGREGATOR_TOKEN": "",
    }.items():
        monkeypatch.setenv(name, value)
    server = scripted({("POST", "/v1/uploads"): [(201, _grant({}), {})], ("PUT", "/put/"): [(200, "", {})]})
    code = main(
        ["push", "--shard", "1/2", "--profile-folder", str(folder), "--api-url", server.url, "--commit", "a" * 40]
    )
    assert code == 0
    request = json.loads(server.received[0][2])
    assert request["metadata"]["tokenless"] is True and request["metadata"]["headRef"] == "someone:f"
    sent = request["metadata_body"].encode()
    assert f'CodSpeed Run Hash: "{hashlib.sha256(sent).hexdigest()}"' in capsys.readouterr().err.splitlines()
    # a push the aggregator refused sent nothing upstream: no Run Hash to look for (it was printed all the same)
    unlisted = {"error": "missing Authorization header: ... a/b is not one of them"}
    refused = scripted({("POST", "/v1/uploads"): [(401, unlisted, {})]})
    args = ["push", "--shard", "1/2", "--profile-folder", str(folder), "--api-url", refused.url, "--commit", "a" * 40]
    main(args)  # a fork's push that cannot be taken warns and exits 0: the contributor's job is not failed
    said = capsys.readouterr()
    assert "CodSpeed Run Hash" not in said.err + said.out, said


def test_a_push_whose_shard_was_accepted_exits_0_when_following_it_upstream_fails(
    scripted, tmp_path, monkeypatch, capsys
):
    """The network dropped while push waited for the part upstream: it exited 6 after its shard was
    accepted, failing a job whose upload had succeeded. docs/client.md: a part not yet upstream is a warning."""
    from codspeed_local.profiles import make_profile_folder

    monkeypatch.setenv("CODSPEED_RETRIES", "1")
    folder = make_profile_folder(tmp_path / "p", 321, ["t::one"])
    server = scripted(
        {
            ("POST", "/v1/uploads"): [(201, {**_grant({}), "sent_on_arrival": True}, {})],
            ("PUT", "/put/"): [(200, "", {})],
            ("GET", "/v1/runs/"): [(503, {"error": "unreachable"}, {})],
        }
    )
    assert _push(server, ["--profile-folder", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "was accepted, but whether its part is upstream could not be followed" in err and "Traceback" not in err
