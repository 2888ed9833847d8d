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
    assert requirements(libraries) == ["aws-lambda-powertools", "boto3", "botocore", "pydantic"]
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


def _bin(tmp_path: Path, name: str, links: dict[str, str]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for link, target in links.items():
        (folder / link).symlink_to(target)
    return folder


def _python39(tmp_path: Path) -> str:
    """A Python 3.9 (pyenv's, where the machine has it; else one that fails as 3.9 fails on the build)."""
    found = sorted(Path.home().glob(".pyenv/versions/3.9*/bin/python3.9"))
    if found:
        return str(found[-1])
    stub = tmp_path / "python3.9-stub"
    stub.write_text('#!/bin/sh\necho "TypeError: unsupported operand type(s) for |" >&2\nexit 1\n')
    stub.chmod(0o755)
    return str(stub)


def _packaging_python(path: list[Path]) -> subprocess.CompletedProcess:
    """What ``sam build`` runs for the sweeper, as it would run it with this PATH (``make -n``: the Python
    chosen, nothing installed)."""
    return subprocess.run(
        ["/usr/bin/make", "-n", "-C", str(FUNCTIONS), "build-SweeperFunction", "ARTIFACTS_DIR=/tmp/out"],
        env={"PATH": ":".join(str(p) for p in path), "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sam_build_packages_with_a_python_of_3_10_or_later_with_pip_whatever_comes_first_on_the_path(tmp_path):
    """Before: the first ``python3`` on the PATH, whatever it was: 3.9 failed with a TypeError, one without
    pip with a CalledProcessError (Ubuntu 20.04, 22.04 without python3-pip, Amazon Linux 2)."""
    old = _bin(tmp_path, "old", {"python3": _python39(tmp_path)})
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "python3.11").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # this venv's: it has pip
    (runtime / "python3.11").chmod(0o755)
    chosen = _packaging_python([old, bare / "bin", runtime])
    assert chosen.returncode == 0, chosen.stderr
    assert f"{runtime / 'python3.11'} function_package.py codspeed_aggregator.handlers.sweeper" in chosen.stdout
    none = _packaging_python([old, bare / "bin"])
    assert none.returncode != 0 and "Traceback" not in none.stderr
    assert (
        "sam build needs a python3 of 3.10 or later with pip on the PATH (or PACKAGE_PYTHON naming one), and "
        "found none: install one, or run sam build --use-container" in none.stderr
    )


def test_a_package_is_compiled_by_the_runtimes_python_with_hashes_nothing_has_to_check(tmp_path):
    from function_package import compile_bytecode

    copy_modules("codspeed_aggregator.handlers.sweeper", tmp_path)
    assert compile_bytecode(tmp_path, sys.executable)
    compiled = sorted(tmp_path.rglob("*.cpython-311.pyc"))
    sources = sorted(tmp_path.rglob("*.py"))
    assert len(compiled) == len(sources) > 10
    flags = int.from_bytes(compiled[0].read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, unchecked: never compared with a source's time in a read-only zip
