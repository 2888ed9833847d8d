"""Mistakes a new user makes with both command lines, each run as its own process: every one
ends in one sentence on stderr, its documented exit code, and no traceback."""

import gzip
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from codspeed_local.profiles import make_profile_folder
from tests.factories import tar_gz

SHA = "a" * 40
RUN = ["--project", "acme/widgets", "--run-id", "1", "--commit", SHA]
API = ["--api-url", "http://127.0.0.1:9", "--token", "t"]


def _files(tmp: Path) -> dict:
    folder = make_profile_folder(tmp / "profiles", 4242, ["t::a"])
    empty_out = tmp / "empty-out"
    empty_out.mkdir()
    (empty_out / "1.out").write_text("")
    not_callgrind = tmp / "not-callgrind"
    not_callgrind.mkdir()
    (not_callgrind / "7.out").write_text("hello\npid: 7\n")
    unreadable = make_profile_folder(tmp / "unreadable", 5, ["t::b"])
    (unreadable / "secret.bin").write_text("x")
    (unreadable / "secret.bin").chmod(0)
    (tmp / "not-gzip.tar.gz").write_bytes(b"plain text")
    (tmp / "gzip-no-tar.tar.gz").write_bytes(gzip.compress(b"no tar inside" * 100))
    (tmp / "good.tar.gz").write_bytes(tar_gz({"./7.out": b"# callgrind format\nversion: 1\npid: 7\ncmd: x\n"}))
    (tmp / "copy.tar.gz").write_bytes((tmp / "good.tar.gz").read_bytes())
    (tmp / "shards.toml").write_text('[shards.a]\npaths = ["a/**"]\n')
    (tmp / "long-path.txt").write_text("a/" * 3000 + "x.rs\n")
    (tmp / "changed.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe" * 8)
    return {"folder": folder, "tmp": tmp}


def _client(*args):
    return [sys.executable, "-m", "codspeed_client.cli", *args]


def _aggregator(*args):
    return [sys.executable, "-m", "codspeed_aggregator.cli", *args]


# (what, argv maker, exit code, words the one sentence must hold, extra environment)
CASES = [
    (
        "plan given a changed path longer than a path",
        lambda f: _client(
            "plan",
            "--config",
            str(f["tmp"] / "shards.toml"),
            "--changed",
            str(f["tmp"] / "long-path.txt"),
            "--project",
            "a/b",
        ),
        2,
        "a changed path of 6004 characters",
        {},
    ),
    (
        "plan given a binary file as --changed",
        lambda f: _client(
            "plan",
            "--config",
            str(f["tmp"] / "shards.toml"),
            "--changed",
            str(f["tmp"] / "changed.bin"),
            "--project",
            "a/b",
        ),
        2,
        "is not text (UTF-8): give a file of one path per line",
        {},
    ),
    (
        "plan given a folder as --config",
        lambda f: _client("plan", "--config", str(f["tmp"]), "--changed", "-", "--project", "a/b"),
        3,
        "cannot read the shard config",
        {},
    ),
    (
        "plan writing --dotenv into a folder that is not there",
        lambda f: _client(
            "plan",
            "--config",
            str(f["tmp"] / "shards.toml"),
            "--changed",
            str(f["tmp"] / "shards.toml"),
            "--dotenv",
            str(f["tmp"] / "missing" / "dir" / "x"),
            "--project",
            "a/b",
        ),
        2,
        "cannot write the plan to --dotenv",
        {},
    ),
    (
        "project without a slash",
        lambda f: _client(
            "push",
            "--shard",
            "1/2",
            "--profile-folder",
            str(f["folder"]),
            *API,
            "--project",
            "widgets",
            "--run-id",
            "1",
            "--commit",
            SHA,
        ),
        2,
        "is not owner/repo",
        {},
    ),
    (
        "project without a slash, dry run",
        lambda f: _client(
            "push",
            "--shard",
            "1/2",
            "--profile-folder",
            str(f["folder"]),
            "--project",
            "widgets",
            "--run-id",
            "1",
            "--commit",
            SHA,
            "--dry-run",
        ),
        2,
        "is not owner/repo",
        {},
    ),
    (
        "project with a '..' segment",
        lambda f: _client("close", *API, "--project", "acme/../b", "--run-id", "1"),
        2,
        "is not owner/repo",
        {},
    ),
    (
        "empty --profile-folder (the action's default)",
        lambda f: _client("push", "--shard", "1/2", "--profile-folder", "", *API, *RUN),
        2,
        "--profile-folder is empty",
        {},
    ),
    (
        "empty --archive",
        lambda f: _client("push", "--shard", "1/2", "--archive", "", *API, *RUN),
        2,
        "--archive is empty",
        {},
    ),
    (
        "shard 1/0",
        lambda f: _client("push", "--shard", "1/0", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "1 <= I <= N",
        {},
    ),
    (
        "shard 5/4",
        lambda f: _client("push", "--shard", "5/4", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "1 <= I <= N",
        {},
    ),
    (
        "shard -1/3",
        lambda f: _client("push", "--shard", "-1/3", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "--shard",
        {},
    ),
    (
        "shard 1/3/5",
        lambda f: _client("push", "--shard", "1/3/5", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "neither I/N",
        {},
    ),
    (
        "shard ''",
        lambda f: _client("push", "--shard", "", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "neither I/N",
        {},
    ),
    (
        "shard 3 without a total",
        lambda f: _client("push", "--shard", "3", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "write --shard 3/N",
        {},
    ),
    (
        "no shard at all",
        lambda f: _client("push", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "no --shard",
        {},
    ),
    (
        "shard not among expect",
        lambda f: _client("push", "--shard", "x", "--expect", "a,b", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "not among --expect",
        {},
    ),
    (
        "expect naming a shard twice",
        lambda f: _client("push", "--shard", "a", "--expect", "a,a", "--profile-folder", str(f["folder"]), *API, *RUN),
        2,
        "names a shard twice",
        {},
    ),
    (
        "expect with a shard name that cannot be",
        lambda f: _client(
            "push", "--shard", "a b", "--expect", "a b,c", "--profile-folder", str(f["folder"]), *API, *RUN
        ),
        2,
        "is not usable",
        {},
    ),
    (
        "I/N and expect together",
        lambda f: _client(
            "push", "--shard", "1/2", "--expect", "a,b", "--profile-folder", str(f["folder"]), *API, *RUN
        ),
        2,
        "drop --expect",
        {},
    ),
    (
        "commit that is not hex",
        lambda f: _client("close", *API, "--project", "a/b", "--run-id", "1", "--commit", "main"),
        2,
        "is not a commit SHA",
        {},
    ),
    (
        "commit too short",
        lambda f: _client("close", *API, "--project", "a/b", "--run-id", "1", "--commit", "abc"),
        2,
        "is not a commit SHA",
        {},
    ),
    (
        "run id with a space",
        lambda f: _client("close", *API, "--project", "a/b", "--run-id", "run 1"),
        2,
        "is not a run id",
        {},
    ),
    (
        "URL without a scheme",
        lambda f: _client("close", "--api-url", "127.0.0.1:8787", "--token", "t", "--project", "a/b", "--run-id", "1"),
        2,
        "is not an http(s):// URL",
        {},
    ),
    (
        "no aggregator URL",
        lambda f: _client("close", "--token", "t", "--project", "a/b", "--run-id", "1"),
        3,
        "no aggregator URL",
        {},
    ),
    (
        "no token",
        lambda f: _client("close", "--api-url", "http://127.0.0.1:9", "--project", "a/b", "--run-id", "1"),
        3,
        "no token",
        {},
    ),
    (
        "CodSpeed's own token is not taken",
        lambda f: _client("close", "--api-url", "http://127.0.0.1:9", "--project", "a/b", "--run-id", "1"),
        3,
        "CODSPEED_AGGREGATOR_TOKEN",
        {"CODSPEED_TOKEN": "codspeed-secret"},
    ),
    ("no run id outside CI", lambda f: _client("close", *API, "--project", "a/b"), 3, "cannot tell the run id", {}),
    (
        "retries that are not a number",
        lambda f: _client("close", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "CODSPEED_RETRIES",
        {"CODSPEED_RETRIES": "many"},
    ),
    (
        "negative status timeout",
        lambda f: _client("status", "--wait", "--timeout", "-5", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "--timeout must be 0 or more",
        {},
    ),
    (
        "zero poll interval",
        lambda f: _client("status", "--wait", "--interval", "0", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "--interval more than 0",
        {},
    ),
    (
        "timeout that is not a number",
        lambda f: _client("status", "--timeout", "soon", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "invalid float value",
        {},
    ),
    (
        "unknown format",
        lambda f: _client("status", "--format", "xml", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "invalid choice",
        {},
    ),
    (
        "unknown executor",
        lambda f: _client(
            "push", "--shard", "1/2", "--executor", "cpu", "--profile-folder", str(f["folder"]), *API, *RUN
        ),
        2,
        "invalid choice",
        {},
    ),
    ("unknown command", lambda f: _client("upload"), 2, "invalid choice", {}),
    (
        "missing profile folder",
        lambda f: _client("push", "--shard", "1/2", "--profile-folder", str(f["tmp"] / "nope"), *API, *RUN),
        7,
        "does not exist",
        {},
    ),
    (
        "a folder as --archive",
        lambda f: _client("push", "--shard", "1/2", "--archive", str(f["folder"]), *API, *RUN),
        7,
        "is a folder",
        {},
    ),
    (
        "a file as --profile-folder",
        lambda f: _client("push", "--shard", "1/2", "--profile-folder", str(f["tmp"] / "good.tar.gz"), *API, *RUN),
        7,
        "is a file: pass the folder CodSpeed wrote the profiles to (an archive goes with push --archive)",
        {},
    ),
    (
        "missing archive",
        lambda f: _client("push", "--shard", "1/2", "--archive", str(f["tmp"] / "nope.tar.gz"), *API, *RUN),
        7,
        "does not exist",
        {},
    ),
    (
        "an empty .out",
        lambda f: _client("push", "--shard", "1/2", "--profile-folder", str(f["tmp"] / "empty-out"), *RUN, "--dry-run"),
        7,
        "is not a callgrind file",
        {},
    ),
    (
        "a .out that is not callgrind",
        lambda f: _client(
            "push", "--shard", "1/2", "--profile-folder", str(f["tmp"] / "not-callgrind"), *RUN, "--dry-run"
        ),
        7,
        "is not a callgrind file",
        {},
    ),
    pytest.param(
        "an unreadable file in the folder",
        lambda f: _client("push", "--shard", "1/2", "--profile-folder", str(f["tmp"] / "unreadable"), *API, *RUN),
        7,
        "must be readable",
        {},
        marks=pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file"),
        id="an unreadable file in the folder",
    ),
    (
        "an archive that is not gzip nor tar",
        lambda f: _client("push", "--shard", "1/2", "--archive", str(f["tmp"] / "not-gzip.tar.gz"), *RUN, "--dry-run"),
        7,
        "neither gzip-compressed nor a tar archive",
        {},
    ),
    (
        "gzip with no tar inside",
        lambda f: _client(
            "push", "--shard", "1/2", "--archive", str(f["tmp"] / "gzip-no-tar.tar.gz"), *RUN, "--dry-run"
        ),
        7,
        "gzip but not a tar archive",
        {},
    ),
    (
        "a gate that is not a percentage",
        lambda f: _client("status", "--fail-on-regression", "lots", *API, "--project", "a/b", "--run-id", "1"),
        2,
        "'lots' is not a percentage (5 or 5%)",
        {},
    ),
    (
        "a token with a space inside",
        lambda f: _client(
            "close", "--api-url", "http://127.0.0.1:9", "--token", "to ken", "--project", "a/b", "--run-id", "1"
        ),
        3,
        "which an HTTP header cannot carry",
        {},
    ),
    (
        "an aggregator that is not there",
        lambda f: _client("close", *API, "--project", "a/b", "--run-id", "1"),
        6,
        "cannot reach",
        {"CODSPEED_RETRIES": "1"},
    ),
    # codspeed-aggregator
    ("local on an invalid port", lambda f: _aggregator("local", "--port", "99999"), 2, "is not a port", {}),
    ("local on a busy port", lambda f: _aggregator("local", "--port", str(f["busy"])), 3, "cannot listen on port", {}),
    (
        "local with a token the client would refuse",
        lambda f: _aggregator("local", "--token", "tøk"),
        2,
        "printable ASCII only",
        {},
    ),
    ("client without a command", lambda f: _client(), 2, "{push,open,plan,durations,split,close,status,env,pack}", {}),
    (
        "local with a deadline of 0",
        lambda f: _aggregator("local", "--deadline", "0"),
        2,
        "is not a number of seconds",
        {},
    ),
    (
        "local with a file as --upstream-dir",
        lambda f: _aggregator("local", "--port", "0", "--upstream-dir", str(f["tmp"] / "good.tar.gz")),
        2,
        "is a file, not a folder",
        {},
    ),
    (
        "local with an upstream URL that is not one",
        lambda f: _aggregator("local", "--port", "0", "--upstream-url", "notaurl"),
        2,
        "'notaurl' is not an http(s):// URL",
        {},
    ),
    (
        "sample profiles of 0 benchmarks",
        lambda f: _aggregator("sample-profiles", str(f["tmp"] / "new"), "--benchmarks", "0"),
        2,
        "'0' is not a number of benchmarks (1 or more)",
        {},
    ),
    (
        "sample profiles with pid 0",
        lambda f: _aggregator("sample-profiles", str(f["tmp"] / "new"), "--pid", "0"),
        2,
        "'0' is not a pid (1 or more)",
        {},
    ),
    (
        "merge into a missing folder",
        lambda f: _aggregator("merge", str(f["tmp"] / "good.tar.gz"), "-o", str(f["tmp"] / "no/such/m.tar.gz")),
        7,
        "does not exist",
        {},
    ),
    (
        "merge into an empty name",
        lambda f: _aggregator("merge", str(f["tmp"] / "good.tar.gz"), "-o", ""),
        2,
        "is not a file name",
        {},
    ),
    (
        "merge into one of its inputs",
        lambda f: _aggregator(
            "merge", str(f["tmp"] / "good.tar.gz"), str(f["tmp"] / "copy.tar.gz"), "-o", str(f["tmp"] / "copy.tar.gz")
        ),
        2,
        "is one of the bundles",
        {},
    ),
    (
        "merge of a missing bundle",
        lambda f: _aggregator("merge", str(f["tmp"] / "nope.tar.gz"), "-o", str(f["tmp"] / "m.tar.gz")),
        7,
        "cannot read",
        {},
    ),
    (
        "merge of a bad bundle",
        lambda f: _aggregator("merge", str(f["tmp"] / "not-gzip.tar.gz"), "-o", str(f["tmp"] / "m.tar.gz")),
        7,
        "refused",
        {},
    ),
    ("merge without -o", lambda f: _aggregator("merge", str(f["tmp"] / "good.tar.gz")), 2, "required", {}),
    (
        "token create without AWS configuration",
        lambda f: _aggregator("token", "create", "--project", "acme/widgets"),
        3,
        "TABLE_NAME",
        {"TABLE_NAME": ""},
    ),
    (
        "token create for a bad project",
        lambda f: _aggregator("token", "create", "--project", "widgets"),
        2,
        "is not owner/repo",
        {},
    ),
    ("token revoke without a token", lambda f: _aggregator("token", "revoke"), 2, "needs --token", {}),
    (
        "token create without a project",
        lambda f: _aggregator("token", "create"),
        2,
        "token create needs --project owner/repo",
        {},
    ),
    (
        "webhook secret for a bad project",
        lambda f: _aggregator("webhook-secret", "--project", "bad"),
        2,
        "--project 'bad' is not owner/repo",
        {"WEBHOOK_SECRET": "s"},
    ),
    (
        "webhook secret for a bad owner",
        lambda f: _aggregator("webhook-secret", "--owner", ".."),
        2,
        "--owner '..' is not an organization or user name",
        {"WEBHOOK_SECRET": "s"},
    ),
    (
        "redrive without queues",
        lambda f: _aggregator("redrive"),
        2,
        "give --dead-letter-url",
        {"FINALIZE_QUEUE_URL": "", "FINALIZE_DLQ_URL": ""},
    ),
    (
        "webhook secret without a secret",
        lambda f: _aggregator("webhook-secret", "--project", "a/b"),
        3,
        "no webhook secret",
        {"WEBHOOK_SECRET": "", "WEBHOOK_SECRET_PARAMETER": ""},
    ),
    ("webhook secret without a scope", lambda f: _aggregator("webhook-secret"), 2, "required", {}),
    (
        "refresh event without a secret",
        lambda f: _aggregator("refresh-event", "--project", "a/b", "--run-id", "1"),
        3,
        "no webhook secret: pass --webhook-secret",
        {"WEBHOOK_SECRET": "", "WEBHOOK_SECRET_PARAMETER": ""},
    ),
    (
        "refresh event of an odd attempt",
        lambda f: _aggregator("refresh-event", "--project", "a/b", "--run-id", "1~"),
        2,
        "--run-id '1~' ends with '~' but names no attempt",
        {"WEBHOOK_SECRET": "s"},
    ),
    (
        "pack into a folder",
        lambda f: _client("pack", str(f["folder"]), "-o", str(f["tmp"])),
        2,
        "is not a file name",
        {},
    ),
    (
        "pack into a missing folder",
        lambda f: _client("pack", str(f["folder"]), "-o", str(f["tmp"] / "no" / "x.tar.gz")),
        2,
        "does not exist",
        {},
    ),
    (
        "pack a missing folder",
        lambda f: _client("pack", str(f["tmp"] / "nowhere"), "-o", str(f["tmp"] / "x.tar.gz")),
        7,
        "does not exist",
        {},
    ),
    ("pack without -o", lambda f: _client("pack", str(f["folder"])), 2, "required", {}),
    (
        "pack an empty .out",
        lambda f: _client("pack", str(f["tmp"] / "empty-out"), "-o", str(f["tmp"] / "empty.tar.gz")),
        7,
        "is not a callgrind file",
        {},
    ),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    found = _files(tmp_path_factory.mktemp("mistakes"))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    found["busy"] = busy.getsockname()[1]
    yield found
    busy.close()


def _name(case) -> str:
    return case.values[0] if hasattr(case, "values") else case[0]


def test_there_are_forty_mistakes_at_least():
    assert len(CASES) >= 40 and len({_name(c) for c in CASES}) == len(CASES)


@pytest.mark.parametrize("what, argv, code, words, extra", CASES, ids=[_name(c) for c in CASES])
@pytest.mark.slow
def test_each_mistake_is_one_sentence_its_exit_code_and_no_traceback(files, what, argv, code, words, extra):
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GITLAB", "CI_", "BUILDKITE", "CODSPEED_"))
    }
    env = {**env, **extra}
    if what == "merge into one of its inputs":
        before = (files["tmp"] / "copy.tar.gz").read_bytes()
    done = subprocess.run(argv(files), capture_output=True, text=True, env=env, timeout=60, cwd=files["tmp"])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, (what, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and lines, (what, done.stderr)
    assert words in lines[-1], (what, done.stderr)
    if what == "merge into one of its inputs":
        assert (files["tmp"] / "copy.tar.gz").read_bytes() == before  # the input is left whole
    if what.startswith(("webhook secret for", "token create")):
        assert done.stdout == ""  # no secret, no token printed
    if what == "pack an empty .out":
        assert not (files["tmp"] / "empty.tar.gz").exists()  # nothing written
    if what.startswith("sample profiles"):
        assert not (files["tmp"] / "new").exists()
