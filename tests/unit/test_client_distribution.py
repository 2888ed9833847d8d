"""codspeed-client ships alone (client/pyproject.toml): requests (pathspec and, before 3.11, tomli
for plan), Python 3.10 and up, and the shared rules (codspeed_rules) in its wheel. No Python 3.10
is on this machine: every module the client's wheel holds is parsed with its grammar, and `make
lint` checks every call against it (vermin)."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "client"


def _modules():
    for package in ("codspeed_client", "codspeed_rules"):
        yield from sorted((CLIENT / package).glob("*.py"))


def test_the_client_distribution_needs_requests_and_plans_matcher_only_and_python_3_10():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["requests>=2.25", "pathspec>=0.10", "tomli>=1.1; python_version < '3.11'"]
    assert project["requires-python"] == ">=3.10"
    assert (CLIENT / "codspeed_rules").resolve() == ROOT / "functions" / "codspeed_rules"  # one copy of the rules


def test_make_lint_holds_what_the_wheel_ships_to_the_python_it_declares():
    """The lint pass once broke the client on the Python it declared (``zip(strict=...)``, 3.10+,
    on a 3.9 minimum): nothing checked the minimum. vermin does, over the wheel's packages, at it."""
    declared = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]["requires-python"].removeprefix(">=")
    shipped = tomllib.loads((CLIENT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    [line] = [line for line in (ROOT / "Makefile").read_text().splitlines() if "vermin" in line]
    assert f"-t={declared}-" in line and "--violations" in line
    assert {p.split(".")[0] for p in shipped} == {
        w.removeprefix("client/") for w in line.split() if w.startswith("client/")
    }


def test_every_module_of_the_client_parses_as_the_python_it_declares():
    modules = list(_modules())
    assert len(modules) >= 12
    for path in modules:
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))


def test_importing_the_client_and_its_rules_loads_no_aggregator_dependency():
    code = (
        "import sys, codspeed_client.cli, codspeed_client.bundle, codspeed_client.api, codspeed_rules.bundle; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'boto3', 'botocore', 'pydantic', "
        "'aws_lambda_powertools', 'isal', 'codspeed_wire', 'codspeed_aggregator'}))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )


def test_the_changelog_starts_at_the_version_every_part_of_the_release_says():
    """The first release: the aggregator's, the client's and the upstream's User-Agent say one version,
    the changelog's latest, which states the upgrade rule from then on."""
    import re

    from codspeed_aggregator.adapters.upstream_http import USER_AGENT
    from codspeed_client import __version__

    changelog = (ROOT / "CHANGELOG.md").read_text()
    latest = re.search(r"^## ([0-9]+\.[0-9]+\.[0-9]+) ", changelog, re.M)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert latest and latest.group(1) == version == __version__ == USER_AGENT.rsplit("/", 1)[1]
    assert "## Upgrading" in changelog and "reads what the release before it wrote" in changelog
