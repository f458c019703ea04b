"""The shape of the code: the one-way rules between packages, no import circles, small
modules, and the README's Layout map matching the tree (docs name every module)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("placement", "solvers")
SOLVER_LIBRARIES = ("highspy", "ortools", "pulp", "pyscipopt")
#: the most lines a module may have (the issue's "about 400", with room for a docstring)
MAX_LINES = 450


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports(name: str, path: Path) -> set[str]:
    """Every module named by an import anywhere in the file (lazy ones included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {m for m in imports(name, path) if m in mods and m != name} for name, path in mods.items()}


def reach(g: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for m in g[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def test_no_import_circles():
    g = graph()
    # a package's __init__ re-exporting its submodules is not a circle
    edges = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in g.items()}
    circles = sorted(m for m in edges if m in reach(edges, m))
    assert circles == []


def test_solvers_know_nothing_of_placement():
    g = graph()
    assert [m for m in g if m.startswith("solvers") and any(d.startswith("placement") for d in g[m])] == []


def test_the_validator_imports_no_formulation_and_no_solver():
    below = reach(graph(), "placement.model.evaluate")
    assert not [m for m in below if m.startswith(("placement.formulation", "placement.chain", "solvers"))]


def test_placement_reaches_solver_libraries_only_through_solvers():
    mods = modules()
    direct = {name: sorted(m for m in imports(name, path) if m.split(".")[0] in SOLVER_LIBRARIES)
              for name, path in mods.items() if name.startswith("placement")}
    assert {k: v for k, v in direct.items() if v} == {}


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_are_small(name):
    lines = len(modules()[name].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def test_readme_layout_maps_every_module():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):]
    layout = layout[: layout.index("\n## ", 1)]
    listed = set(re.findall(r"^\s*- `([\w./]+\.py)`", layout, flags=re.M))
    actual = {str(p.relative_to(ROOT)) for p in modules().values()}
    assert sorted(actual - listed) == [] and sorted(listed - actual) == []
