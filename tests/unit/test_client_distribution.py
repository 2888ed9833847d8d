"""codspeed-client ships alone (client/pyproject.toml): requests (pathspec and, before 3.11, tomli
for plan), Python 3.9 and up, and the
shared rules (codspeed_rules) in its wheel. No Python 3.9 is on this machine: every module the
client's wheel holds is parsed with 3.9's grammar, and annotations are never evaluated."""

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


def test_the_client_distribution_needs_requests_and_plans_matcher_only_and_python_3_9():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == ["requests>=2.25", "pathspec>=0.10", "tomli>=1.1; python_version < '3.11'"]
    assert project["requires-python"] == ">=3.9"
    assert (CLIENT / "codspeed_rules").resolve() == ROOT / "functions" / "codspeed_rules"  # one copy of the rules


def test_every_module_of_the_client_parses_as_python_3_9_and_defers_its_annotations():
    modules = list(_modules())
    assert len(modules) >= 12
    for path in modules:
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))
        has_annotations = any(
            isinstance(n, (ast.AnnAssign, ast.arg)) and n.annotation is not None
            for n in ast.walk(tree)
            if isinstance(n, (ast.AnnAssign, ast.arg))
        ) or any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None for n in ast.walk(tree)
        )
        future = any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
        assert future or not has_annotations, (
            f"{path.name}: 'X | None' hints need 'from __future__ import annotations' on 3.9"
        )


def test_importing_the_client_and_its_rules_loads_no_aggregator_dependency():
    code = (
        "import sys, codspeed_client.cli, codspeed_client.bundle, codspeed_client.api, codspeed_rules.bundle; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'boto3', 'botocore', 'pydantic', "
        "'aws_lambda_powertools', 'isal', 'codspeed_wire', 'codspeed_aggregator'}))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )
