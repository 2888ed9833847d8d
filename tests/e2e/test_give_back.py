"""A push that refuses its own bundle gives its grant back: a close made outside any CI (a laptop, a
script: nothing to speak for) ends the run within seconds, not when the unused URL expires 10 minutes
later. The real client, over real HTTP, through the local stack, in both forward modes."""

import uuid

import pytest

from tests.bad_inputs import BUNDLES
from tests.conftest import PARTS_PROJECT
from tests.e2e.test_sharded_run import _client, _common, _folders, _report

HOSTILE = [
    "absolute member path",
    "character device",
    "hard link out of the folder",
    "symlink out of the folder",
    "member with ..",
    "gzip bomb",
    ".out without pid header",
    "no .out file",
    "truncated gzip",
    "not gzip",
    "tar inside the tar",
    ".out twice",
]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["one-upload", "parts"])
def test_twelve_hostile_bundles_each_beside_a_good_shard_outside_ci_end_within_a_minute_of_the_close(
    stack, tmp_path, mode
):
    project = PARTS_PROJECT if mode == "parts" else f"acme/give-back-{uuid.uuid4().hex[:6]}"
    [good] = _folders(tmp_path, 1)
    runs = {name: f"give-back-{uuid.uuid4().hex[:10]}" for name in HOSTILE}
    pushes = []
    for name, run_id in runs.items():
        _, make, _ = next(case for case in BUNDLES if case[0] == name)
        archive = tmp_path / f"{run_id}.tar.gz"
        archive.write_bytes(make())
        common = _common(project, run_id)
        pushes.append(_client(stack, "push", "--shard", "1/2", "--profile-folder", str(good), *common))
        pushes.append(_client(stack, "push", "--shard", "2/2", "--archive", str(archive), "--json", *common))
    said = [(p.args, p.wait(timeout=180), p.communicate()) for p in pushes]
    assert all(code == 0 for args, code, _ in said[::2]), said[::2]  # every good shard went
    for name, (_, code, (_, err)) in zip(HOSTILE, said[1::2], strict=True):
        assert code in (0, 7), f"{name}: {code} {err}"  # refused on its way (7), or sent whole and refused on arrival
    closes = [_client(stack, "close", *_common(project, run_id)) for run_id in runs.values()]
    assert all(c.wait(timeout=120) == 0 for c in closes), [c.communicate() for c in closes]
    waits = [
        _client(stack, "status", "--wait", "--timeout", "60", "--interval", "0.5", *_common(project, run_id))
        for run_id in runs.values()
    ]
    for name, run_id, waited in zip(HOSTILE, runs.values(), waits, strict=True):
        out, err = waited.communicate(timeout=120)
        assert waited.returncode == 11, f"{name}: {waited.returncode} {out} {err}"  # final, shard 2 not in
        assert "1 shard rejected, their bundle refused: 2 (" in err, (name, err)
        report = _report(stack, project, run_id)
        shards = {s["name"]: s for s in report["shards"]}
        assert report["state"] == "forwarded" and shards["1"]["state"] == "arrived", (name, report)
        bad = shards["2"]
        assert bad["state"] == "rejected" and bad["reason"], (name, bad)
        if bad["reason"].startswith("given back"):  # refused by the client: its reason, said
            assert "its bundle would be refused by the aggregator" in bad["reason"], (name, bad)
