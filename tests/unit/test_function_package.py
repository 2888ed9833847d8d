"""Each function's package is what its handler reaches (functions/function_package.py, which sam
build runs): checked here on the modules themselves, copied as sam build copies them."""

import subprocess
import sys
from pathlib import Path

import pytest

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
sys.path.insert(0, str(FUNCTIONS))
from function_package import copy_modules, reachable, requirements  # noqa: E402 -- a build script, not a package

HANDLERS = ("api", "arrivals", "finalizer", "sweeper")


@pytest.mark.parametrize("name", HANDLERS)
def test_a_function_s_package_imports_its_handler_with_only_the_modules_copied(tmp_path, name):
    handler = f"codspeed_aggregator.handlers.{name}"
    copy_modules(handler, tmp_path)
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import {handler}, codspeed_aggregator;"
            "print(codspeed_aggregator.__file__)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().startswith(str(tmp_path))  # the copy, not the repository's


def test_no_function_ships_the_operator_s_commands_and_the_sweeper_ships_only_what_it_loads():
    reached = {name: reachable(FUNCTIONS, f"codspeed_aggregator.handlers.{name}") for name in HANDLERS}
    for ours, _ in reached.values():
        assert not ours & {f"codspeed_aggregator.{m}" for m in ("cli", "operator_commands", "offline", "redrive")}
    ours, libraries = reached["sweeper"]
    assert requirements(libraries) == ["aws-lambda-powertools[tracer]", "boto3", "botocore", "pydantic"]
    assert "codspeed_aggregator.wiring" not in ours and "codspeed_aggregator.adapters.bucket" not in ours
    assert "isal" in reached["finalizer"][1] and "requests" in reached["finalizer"][1]


def test_an_import_under_type_checking_is_not_reached_and_a_lazy_one_is(tmp_path):
    package = tmp_path / "codspeed_rules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from mypy_boto3_s3 import S3Client\n"
        "def f():\n    from .b import g\n    import requests\n"
    )
    (package / "b.py").write_text("import json\n")
    ours, libraries = reachable(tmp_path, "codspeed_rules.a")
    assert ours == {"codspeed_rules", "codspeed_rules.a", "codspeed_rules.b"} and libraries == {"requests"}


def test_a_library_with_no_known_distribution_stops_the_build_naming_it():
    with pytest.raises(SystemExit, match=r"no distribution known for yaml: add it to DISTRIBUTIONS"):
        requirements({"yaml", "boto3"})
