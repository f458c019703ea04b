"""The shape of the code: the one-way rules between packages (floors, no arrow back up, no
import circles, few floors), small modules, a short top level, and the maps matching the
tree: the README names every package, docs/architecture.md every module."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
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


#: the floors of docs/architecture.md, bottom up: a module may import its own floor and those below
FLOORS = [
    ("solvers",),
    ("placement.deadline", "placement.outputs", "placement.executors"),
    ("placement.model", "placement.plot"),
    ("placement.slots",),
    ("placement.formulation",),
    ("placement.chain",),
    ("placement.online", "placement.bounds"),
    ("placement.offline", "placement.simulate", "placement.integrations", "placement.managers", "placement.serve"),
    ("placement.traces", "placement.batch"),
    ("placement.cli", "placement.cli_simulate", "placement.cli_managers", "placement.__main__", "placement"),
]
#: the longest chain of imports, in modules (``__main__`` included): 16 floors, the service's
#: (cli -> cli_managers -> serve -> serve.app -> serve.service -> online.registry -> ... -> limits:
#: the HTTP layer sits on the scheduler); without it 12
MOST_FLOORS = 16
#: modules beside the packages at placement/'s top level
MAX_TOP_LEVEL = 10
#: the README's length in lines
MAX_README_LINES = 220


def floor(name: str) -> int:
    best = None
    for level, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            if name == prefix or name.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (level, len(prefix))
    assert best is not None, f"{name} is on no floor: add it to FLOORS and docs/architecture.md"
    return best[0]


def test_every_module_is_on_a_floor_and_no_arrow_runs_back_up():
    g = graph()
    up = sorted(f"{m} -> {d}" for m, deps in g.items() for d in deps
                if not m.startswith(d + ".") and floor(d) > floor(m))
    assert up == []


def test_the_import_graph_has_few_floors():
    g = graph()
    edges = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in g.items()}
    height: dict[str, int] = {}

    def tall(m: str) -> int:
        if m not in height:
            height[m] = 1 + max((tall(d) for d in edges[m]), default=0)
        return height[m]

    longest = max(g, key=tall)
    assert tall(longest) - 1 <= MOST_FLOORS, f"{longest}: {tall(longest)} modules tall"


def test_the_top_level_is_short():
    top = sorted(p.name for p in (ROOT / "placement").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_architecture_maps_every_module():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- `([\w./]+\.py)` — ", text[text.index("## Every module"):], flags=re.M))
    actual = {str(p.relative_to(ROOT)) for p in modules().values()}
    assert sorted(actual - listed) == [] and sorted(listed - actual) == []


def test_readme_is_short_and_names_every_package():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    section = text[text.index("## Packages"):]
    section = section[: section.index("\n## ", 1)]
    listed = set(re.findall(r"^- `([\w/]+/)` — ", section, flags=re.M))
    actual = {str(p.parent.relative_to(ROOT)) + "/" for p in (ROOT / "placement").rglob("__init__.py")
              if p.parent != ROOT / "placement"} | {"solvers/"}
    assert sorted(actual - listed) == [] and sorted(listed - actual) == []


def test_the_public_face():
    import placement
    import placement.online

    for name in ("Instance", "Schedule", "solve", "validate", "score", "OnlineScheduler", "make_policy"):
        assert getattr(placement, name) is not None, name
    assert placement.OnlineScheduler is placement.online.OnlineScheduler
    assert placement.make_policy is placement.online.make_policy


def test_the_public_face_imports_nothing_heavy_until_used():
    # a Ctrl-C while the command starts up must meet placement.cli's handler (test_reliability)
    code = ("import sys, placement; assert 'numpy' not in sys.modules, 'eager';"
            "placement.solve; assert 'numpy' in sys.modules; assert 'solve' in dir(placement);"
            "assert set(placement.__all__) == {*placement._PUBLIC, '__version__'}")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
