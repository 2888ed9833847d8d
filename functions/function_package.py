"""What one Lambda function's package holds: the modules its handler can reach, and the libraries
those import, at the pins of requirements.txt. ``sam build`` runs it for each function (its
``Makefile``, in a copy of this folder); standard library only, so any Python 3.10+ can run it.

    python function_package.py codspeed_aggregator.handlers.sweeper ARTIFACTS_DIR [PYTHON]

Reached: every ``import`` and ``from … import`` of a module, those inside functions included (a
lazy import is reached all the same), but for those under ``if TYPE_CHECKING:`` (type stubs, never
deployed). A package's ``__init__`` goes with any module of it."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

OURS = ("codspeed_aggregator", "codspeed_rules", "codspeed_wire")
# the distribution each library we import comes from, with the extras it runs with here
DISTRIBUTIONS = {
    "aws_lambda_powertools": "aws-lambda-powertools",  # tracing is Lambda's own (Tracing: Active): no X-Ray SDK
    "boto3": "boto3",
    "botocore": "botocore",
    "pydantic": "pydantic",
    "requests": "requests",
    "isal": "isal",
    "jwt": "pyjwt[crypto]",  # RS256/ES256 tokens: cryptography, loaded by jwt when a token is checked
}
# Lambda's Python 3.11 runs on Amazon Linux 2 (glibc 2.26) on Graviton: manylinux2014 wheels for aarch64
PLATFORM = ("--platform", "manylinux2014_aarch64", "--implementation", "cp", "--python-version", "3.11")


def _file(root: Path, module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _runtime_imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The modules a module imports at run time (a ``from x import y`` names ``x`` and ``x.y``)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def reachable(root: Path, handler: str) -> tuple[set[str], set[str]]:
    """From ``handler``: our modules it can reach (by dotted name), and the libraries (top-level
    names) they import beside the standard library's."""
    ours: set[str] = set()
    libraries: set[str] = set()
    todo = [handler]
    while todo:
        module = todo.pop()
        top = module.split(".")[0]
        if top not in OURS:
            if top not in sys.stdlib_module_names:
                libraries.add(top)
            continue
        path = _file(root, module)
        if path is None or module in ours:  # ``from package import name``: a name, not a module
            continue
        ours.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages' __init__
        imported = _runtime_imports(ast.parse(path.read_text()), module, path.name == "__init__.py")
        todo += sorted(imported - ours)
    return ours, libraries


def requirements(libraries: set[str]) -> list[str]:
    unknown = sorted(libraries - set(DISTRIBUTIONS))
    if unknown:
        known = f"no distribution known for {', '.join(unknown)}: add it to DISTRIBUTIONS"
        raise SystemExit(f"function_package.py: {known}")
    return sorted(DISTRIBUTIONS[name] for name in libraries)


def copy_modules(handler: str, target: Path) -> list[str]:
    """Copy the modules ``handler`` can reach into ``target``; answers the libraries' requirements."""
    root = Path(__file__).resolve().parent
    ours, libraries = reachable(root, handler)
    for module in sorted(ours):
        source = _file(root, module)
        assert source is not None
        destination = target / source.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
    wanted = requirements(libraries)
    print(f"{handler}: {len(ours)} modules, {' '.join(wanted)}")
    return wanted


def build(handler: str, target: Path, python: str = sys.executable) -> None:
    wanted = copy_modules(handler, target)
    pins = ("--constraint", str(Path(__file__).resolve().parent / "requirements.txt"))
    install = [python, "-m", "pip", "install", "--quiet", "--no-compile", "--only-binary=:all:", *PLATFORM]
    subprocess.run([*install, *pins, "--target", str(target), *wanted], check=True)
    compile_bytecode(target, python)


def compile_bytecode(target: Path, python: str) -> bool:
    """Every module of the package compiled by the runtime's Python (the builder's when it is 3.11, else a
    ``python3.11`` on the PATH): Lambda's /var/task is read-only, so bytecode not shipped is compiled again
    at every cold start. Unchecked hashes: a zip keeps 2-second local-time stamps, which a timestamp check
    could find stale, and nothing can rewrite it there. False, and said, when no such Python is found."""
    runtime = next((p for p in (python, shutil.which("python3.11")) if p and _version(p) == RUNTIME), None)
    if runtime is None:
        print(f"function_package.py: no Python {RUNTIME} found: shipped without bytecode, compiled at every cold start")
        return False
    compiled = [runtime, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(target)]
    if subprocess.run(compiled, check=False).returncode:  # a library's file that is no Python 3.11 (a template)
        print(f"function_package.py: some files of {target} are not Python {RUNTIME}: left as they are")
    return True


RUNTIME = "3.11"  # template.yaml's Runtime: python3.11


def _version(python: str) -> str | None:
    found = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() if found.returncode == 0 else None


if __name__ == "__main__":
    build(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:4])
