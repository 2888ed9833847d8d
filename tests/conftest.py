"""Fixtures: one embedded local stack for each xdist worker's session, and an aggregator on resources nobody polls."""

import gc
import os
import uuid
from collections import Counter

import pytest

TOKEN = "local-token"  # the token the files in events/ carry
WEBHOOK_SECRET = "webhook-secret"


CIRCLECI_ORG = "9f2c0e4a-1b7d-4e0a-9c55-3a6f8d2b7e10"  # the CircleCI organization whose jobs' OIDC tokens it takes
TOKENLESS_PROJECT = "acme/open-source"  # the one project whose tokenless uploads the stack accepts
PARTS_PROJECT = "acme/parts"  # the projects the stack forwards in parts (each shard as it is counted): the e2e tests'
PARTS_LIFECYCLE = "acme/parts-lifecycle"  # and the lifecycle machine's


@pytest.fixture(scope="session")
def oidc_issuer():
    from tests.oidc_issuer import OidcIssuer

    issuer = OidcIssuer()
    yield issuer
    issuer.stop()


_ENFORCERS = []  # the stack's, for the session's report of what each function's role was asked
_WORKERS_SEEN = Counter()  # under xdist: what every worker's stack was asked, summed in the controller


@pytest.fixture(scope="session")
def stack(tmp_path_factory, oidc_issuer):
    from codspeed_local.stack import LocalStack

    # The one-upload mode's stack, its parts-mode projects apart (the default mode, a stack started with no
    # mode: tests/e2e/test_local_command.py and the pull request's life through ``codspeed-aggregator local``)
    env = {
        "OIDC_JWKS_URL": oidc_issuer.jwks_url,
        "TOKENLESS_PROJECTS": TOKENLESS_PROJECT,
        "FORWARD_MODE": "one-upload",
        "CIRCLECI_ORG_IDS": CIRCLECI_ORG,
        "CIRCLECI_JWKS_URL": oidc_issuer.jwks_url.replace("/.well-known/jwks", "/org/{org}/.well-known/jwks-pub.json"),
        "FORWARD_MODES": f"{PARTS_PROJECT}=parts,{PARTS_LIFECYCLE}=parts",
    }
    with LocalStack(
        token=TOKEN,
        webhook_secret=WEBHOOK_SECRET,
        upstream_dir=tmp_path_factory.mktemp("upstream"),
        sweep_every=3600,
        env=env,
    ) as running:
        _ENFORCERS.append(running.enforcer)
        yield running


def pytest_collection_modifyitems(items):
    """Every test under tests/e2e is an end-to-end test (``-m e2e``, ``-m "not e2e"``)."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.e2e)


def pytest_sessionfinish(session):
    """An xdist worker hands what its stack's functions asked for to the controller, which reports it."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["iam_seen"] = [[list(key), count] for enforcer in _ENFORCERS for key, count in enforcer.seen.items()]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for key, count in getattr(node, "workeroutput", {}).get("iam_seen", []):
        _WORKERS_SEEN[tuple(key)] += count


def pytest_terminal_summary(terminalreporter):
    """Every (function, action, resource) the tests made the functions ask for, and IAM's verdict."""
    enforcers = list(_ENFORCERS)
    if _WORKERS_SEEN:
        from codspeed_local.iam import RoleEnforcer

        summed = RoleEnforcer({})
        summed.seen = _WORKERS_SEEN
        enforcers.append(summed)
    for enforcer in enforcers:
        terminalreporter.section("IAM: each function's calls against its role in template.yaml")
        for line in enforcer.report():
            terminalreporter.write_line(line)
        refused = enforcer.refusals()
        terminalreporter.write_line(f"{len(enforcer.seen)} (function, action, resource) seen, {len(refused)} refused")


@pytest.fixture(scope="session")
def isolated(stack, tmp_path_factory):
    """An Aggregator on its own bucket, table and queues that no poller reads: tests drive every step."""
    from tests.isolated import build

    built = build(tmp_path_factory.mktemp("isolated-upstream"), enforcer=stack.enforcer)
    yield built
    built.upstream.stop()


@pytest.fixture
def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def project() -> str:
    """A project of its own, so no other test's run is this test's baseline."""
    return f"acme/widgets-{uuid.uuid4().hex[:8]}"


def pytest_make_parametrize_id(config, val, argname):
    """A parameter of bytes is named by its length: bytes made at collection (a gzip's header holds
    the second it was made) would name a test differently in each xdist worker."""
    if isinstance(val, bytes):
        return f"{argname}-{len(val)}-bytes"


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: five workers for two cores. A worker waits on its local stack's threads (moto's
    server, the pollers, the client's subprocesses) and on the deadlines its tests wait out much
    of the time: one a core leaves the cores idle then, and on this 2-core machine four workers
    ran the suite in 310 s, five in 288 s, six in 304 s (docs/testing.md)."""
    return max(1, 5 * (os.cpu_count() or 1) // 2)


def pytest_runtest_logfinish():
    """What a test left alive is moved out of the collector's way (``gc.freeze``), its cycles collected
    first. Each worker's moto keeps every item its tests wrote, millions of objects by the session's end,
    and each full collection walked them all: about a fifth of a worker's CPU (docs/testing.md)."""
    gc.collect()
    gc.freeze()
