"""End to end: a run declared before any shard runs (``codspeed-client open``), with the real
client, through the local stack."""

import json
import os

from tests.e2e.test_sharded_run import _final, _folders, _report, _run

MAIN = ["--commit", "1" * 40, "--ref", "refs/heads/main"]
PR = ["--commit", "2" * 40, "--ref", "refs/pull/9/merge", "--base-ref", "main"]


def _states(report: dict) -> dict[str, str]:
    return {s["name"]: s["state"] for s in report["shards"]}


def test_a_run_opened_with_a_skip_shows_every_shard_before_any_push_and_is_forwarded_when_the_others_are_in(
        stack, project, tmp_path):
    folders = _folders(tmp_path, 4)
    main_run, pr_run = f"open-main-{os.getpid()}", f"open-pr-{os.getpid()}"
    main = ["--project", project, "--run-id", main_run, *MAIN]
    for i, folder in enumerate(folders, start=1):
        assert _run(stack, "push", "--shard", f"{i}/4", "--profile-folder", str(folder), *main).returncode == 0
    assert _final(stack, project, main_run)["state"] == "forwarded"

    pr = ["--project", project, "--run-id", pr_run, *PR]
    opened = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == f"run {pr_run} ({project}): open: opened: 4 shards expected, 1 skipped (carried from the baseline run)"
    before = _report(stack, project, pr_run)
    assert _states(before) == {"1": "expected", "2": "expected", "3": "skipped", "4": "expected"}
    assert before["arrived"] == 0 and before["counts"]["running"] == 9 and before["counts"]["carried"] == 3
    assert {s["name"]: s["reason"] for s in before["shards"]}["3"].startswith("skipped on purpose when the run was opened")

    refused = _run(stack, "push", "--shard", "3/4", "--profile-folder", str(folders[2]), *pr)
    assert refused.returncode == 5 and (
        f"shard 3 was declared skipped when run {pr_run} of {project} was opened") in refused.stderr, refused.stderr
    again = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)  # a CI re-run of the planning job
    assert again.returncode == 0 and "already open as declared" in again.stdout, again.stdout + again.stderr
    other = _run(stack, "open", "--shards", "4", *pr)
    assert other.returncode == 5 and ("was opened expecting 4 shards, skipping 3; this open declares 4 shards, "
                                      "skipping none" in other.stderr), other.stderr
    assert _report(stack, project, pr_run)["version"] == before["version"]  # refused: nothing changed

    for i in (1, 2, 4):
        assert _run(stack, "push", "--shard", f"{i}/4", "--profile-folder", str(folders[i - 1]), *pr).returncode == 0
    final = _final(stack, project, pr_run)  # complete without a close: the skip was declared
    assert final["state"] == "forwarded" and final["arrived"] == 3, final
    carried = {s["name"]: s for s in final["shards"]}["3"]
    assert carried["state"] == "carried" and carried["source"] == {"run_id": main_run, "commit": "1" * 40}
    [upload] = stack.upstream.uploads(pr_run)
    assert json.loads((upload / "metadata.json").read_text())["runPart"]["metadata"]["carriedShards"] == {
        "3": {"runId": main_run, "commitHash": "1" * 40}}
    done = _run(stack, "open", "--shards", "4", "--skip", "3", *pr)
    assert done.returncode == 0 and "already forwarded: open changes nothing" in done.stdout, done.stdout + done.stderr
    assert len(stack.upstream.uploads(pr_run)) == 1


def test_open_refuses_what_it_cannot_declare_in_one_sentence(stack, project, run_id):
    common = ["--project", project, "--run-id", run_id, *PR]
    for args, says in [
        ([], "say which shards the run has: --shards N (shards 1 to N) or --expect a,b,c"),
        (["--shards", "2", "--expect", "a,b"], "say which shards the run has"),
        (["--shards", "0"], "--shards 0: a run has 1 shard or more"),
        (["--shards", "3", "--skip", "4"], "--skip 4: not among the run's shards (1,2,3)"),
        (["--expect", "a,a"], "--expect a,a names a shard twice"),
    ]:
        refused = _run(stack, "open", *args, *common)
        assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert _report(stack, project, run_id).get("state") is None  # nothing was opened
