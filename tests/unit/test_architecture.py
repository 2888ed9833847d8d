"""The layers as the code must keep them: handlers over wiring over use cases over the domain and
the adapters. Read from the source with ``ast``, so a change that breaks a rule fails here."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "codspeed_aggregator"
ADAPTER_FIELDS = {"ledger", "store", "queue", "upstream", "statuses", "metrics"}  # what Aggregator holds of AWS


def _modules(folder: str = "") -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against the package."""
    found, here = set(), path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(here[: len(here) - node.level]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("handler", _modules("handlers"), ids=lambda p: p.name)
def test_a_handler_imports_no_adapter_and_reaches_none_through_the_use_cases(handler):
    adapters = sorted(m for m in _imports(handler) if m.startswith("codspeed_aggregator.adapters"))
    assert not adapters, f"{handler.name} imports {adapters}: call a use case"
    reached = sorted(
        {
            node.attr
            for node in ast.walk(ast.parse(handler.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in ADAPTER_FIELDS
        }
    )
    assert not reached, f"{handler.name} reaches .{', .'.join(reached)}: call a use case"


def test_the_domain_knows_nothing_of_aws_lambda_or_the_wire():
    for path in _modules("domain"):
        outside = sorted(
            m
            for m in _imports(path)
            if m.split(".")[0] in {"boto3", "botocore", "aws_lambda_powertools", "requests", "pydantic"}
            or m.startswith(("codspeed_aggregator.adapters", "codspeed_aggregator.use_cases"))
        )
        assert not outside, f"{path.name} imports {outside}"


def test_use_cases_call_no_handler_and_build_no_adapter_from_settings():
    for path in _modules("use_cases") + _modules("services"):
        upward = sorted(
            m
            for m in _imports(path)
            if m.startswith(
                (
                    "codspeed_aggregator.handlers",
                    "codspeed_aggregator.wiring",
                    "codspeed_aggregator.adapters.aws",
                    "boto3",
                )
            )
        )
        assert not upward, f"{path.name} imports {upward}"


ROOT = PACKAGE.parents[1]
EVERY_PACKAGE = [
    PACKAGE,
    ROOT / "functions" / "codspeed_rules",
    ROOT / "functions" / "codspeed_wire",
    ROOT / "client" / "codspeed_client",
    ROOT / "local" / "codspeed_local",
]


@pytest.mark.parametrize("package", EVERY_PACKAGE, ids=lambda p: p.name)
def test_no_room_is_too_big_to_read_whole(package):
    """A module of at most 350 lines and a class of at most 250, in every package (the aggregator's
    alone was held to it: the rules, the client and the local stack grew past it)."""
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 350, f"{path.relative_to(ROOT)}: {lines} lines"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                assert size <= 250, f"{path.relative_to(ROOT)}: class {node.name} has {size} lines"


def test_every_module_over_300_lines_says_why_it_stays_whole():
    """docs/layout.md's table names each module of more than 300 lines, and no other."""
    text = (ROOT / "docs" / "layout.md").read_text().split("## Modules over 300 lines", 1)[1]
    listed = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    over = {
        str(path.relative_to(ROOT))
        for package in EVERY_PACKAGE
        for path in package.rglob("*.py")
        if len(path.read_text().splitlines()) > 300
    }
    assert listed == over, f"over 300 lines, not listed: {over - listed}; listed, not over: {listed - over}"


def _layout_modules(package: Path) -> dict[str, str]:
    """The modules docs/layout.md names under ``package`` (its tree starts at a line of its path
    alone), by path within it, with what it says of each."""
    text = (ROOT / "docs" / "layout.md").read_text()
    lines = text.split(f"{package.relative_to(ROOT)}/\n", 1)[1].splitlines()
    found, folders = {}, []  # folders: (indent, name) of the folders the line sits in
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            break  # the next top-level entry: the package's tree ended
        name, _, said = line.strip().partition(" ")
        folders = [(i, f) for i, f in folders if i < indent]
        if name.endswith("/"):
            folders.append((indent, name.rstrip("/")))
        elif name.endswith(".py"):
            found["/".join([*(f for _, f in folders), name])] = said.strip()
    return found


@pytest.mark.parametrize("package", EVERY_PACKAGE, ids=lambda p: p.name)
def test_the_layout_names_every_module_with_what_it_is_for(package):
    """docs/layout.md cannot drift: each module of every package is there, in its folder, with its
    purpose, and nothing it names is gone (it named the aggregator's alone: 12 others were unnamed)."""
    actual = {str(p.relative_to(package)) for p in package.rglob("*.py") if p.name != "__init__.py"}
    named = _layout_modules(package)
    assert sorted(actual - set(named)) == [], "modules docs/layout.md does not name"
    assert sorted(set(named) - actual) == [], "modules docs/layout.md names that are gone"
    assert all(len(said) > 10 for said in named.values()), [m for m, said in named.items() if len(said) <= 10]


def test_every_suppression_states_its_reason_on_its_line_tests_and_benches_included():
    """docs/testing.md says so; 11 ``noqa`` in tests and bench said none (ten E731, one E402)."""
    import re

    bare = []
    for folder in ("functions", "client", "local", "tests", "bench", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                for found in re.finditer(r"# (noqa|type: ignore)\b(.*)", line):
                    if not re.search(r"(--|#)\s*\S", found[2]):  # "# noqa: E731 -- why", "# type: ignore[x]  # why"
                        bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert bare == [], "\n".join(bare)


def _module_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of it that it imports, under TYPE_CHECKING and inside
    functions too (a lazy import is an import all the same)."""
    root = package.parent
    names = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p for p in package.rglob("*.py")
    }
    graph = {}
    for name, path in names.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
        # a package's __init__ is imported with any of its modules: not an edge back to the package
        graph[name] = {m for m in found if m in names and m != name and not name.startswith(f"{m}.")}
    return graph


@pytest.mark.parametrize("package", EVERY_PACKAGE, ids=lambda p: p.name)
def test_no_two_modules_need_each_other_type_checking_and_lazy_imports_included(package):
    """A type two modules need belongs in a third: ``domain/ledger.py`` (now ``records.py``) and ``run_plan.py``
    needed each other (PlanRecord under TYPE_CHECKING), the client's ``ci.py`` and ``ci_providers.py`` too (a
    lazy import)."""
    graph = _module_graph(package)
    circles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                circles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []
