"""The solvers package's import graph: acyclic (even counting type-checking and function-level imports)
and free of ``placement``, so the engine stays usable on its own."""

import ast
from pathlib import Path

import solvers

PACKAGE = Path(solvers.__file__).resolve().parent


def module_name(path: Path) -> str:
    return "solvers" if path.stem == "__init__" else f"solvers.{path.stem}"


def imported_modules(path: Path) -> set[str]:
    """Every module named by an import anywhere in the file: top level, ``if TYPE_CHECKING:``, functions."""
    here = module_name(path)
    package = here if path.stem == "__init__" else here.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)  # `from solvers import lp`
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.glob("*.py")}
    edges = {}
    for name, path in modules.items():
        # `from solvers.lp import x` is an edge to solvers.lp only (the package is already initialising);
        # `from solvers import x` is an edge to the package's __init__ itself, which would close a circle.
        edges[name] = {t for t in imported_modules(path) if t in modules and t != name}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_graph_sees_every_kind_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from solvers.lp import solve_lp\n"
                      "def f():\n    import solvers.mip\n    from . import rows\n")
    assert {"solvers.lp", "solvers.mip", "solvers.rows"} <= imported_modules(sample)
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_solvers_import_graph_is_acyclic():
    edges = graph()
    assert len(edges) > 10  # the walk found the package's modules
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges))


def test_solvers_never_imports_placement():
    for path in sorted(PACKAGE.glob("*.py")):
        bad = sorted(m for m in imported_modules(path) if m == "placement" or m.startswith("placement."))
        assert not bad, f"{path.name} imports {bad}"
