"""The maps and the layering (docs/LAYOUT.md): every package folder's __init__.py docstring names
each of its modules, and imports go one way, logs <- compiler <- debug <- tui."""
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("logs", "compiler", "debug", "tui")            # in import order
FOLDERS = sorted(p.parent for pkg in PACKAGES for p in (REPO / pkg).rglob("__init__.py"))


def _modules(folder: Path) -> list[str]:
    files = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    subpackages = [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
    return sorted(files + subpackages)


@pytest.mark.parametrize("folder", FOLDERS, ids=[str(f.relative_to(REPO)) for f in FOLDERS])
def test_package_docstring_names_every_module(folder):
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    missing = [m for m in _modules(folder) if not re.search(rf"\b{re.escape(m)}\b", doc)]
    assert not missing, f"{folder.relative_to(REPO)}/__init__.py's docstring does not name {missing}"


def test_every_source_folder_is_a_package():
    for pkg in PACKAGES:
        for d in (REPO / pkg).rglob("*"):
            if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")):
                assert (d / "__init__.py").is_file(), f"{d.relative_to(REPO)} has no __init__.py"


def _imports_of(path: Path):
    """(line, package of ours) for every import in the file, function-local ones included."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + ([f"tracetorch.{a.name}" for a in node.names]
                                     if node.module == "tracetorch" else [])
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tracetorch" and len(parts) > 1 and parts[1] in PACKAGES:
                yield node.lineno, parts[1]


def test_imports_go_one_way():
    allowed = {"logs": {"logs"}, "compiler": {"logs", "compiler"},
               "debug": {"logs", "compiler", "debug"}, "tui": {"logs", "tui"}}
    wrong = [f"{path.relative_to(REPO)}:{line} imports tracetorch.{target}"
             for pkg in PACKAGES for path in (REPO / pkg).rglob("*.py")
             for line, target in _imports_of(path) if target not in allowed[pkg]]
    assert not wrong, "imports against the layering (logs <- compiler <- debug <- tui):\n" + "\n".join(wrong)


# the frontend's file-level import graph, every import statement counted (module level,
# function-local, under `if TYPE_CHECKING`: a local import that dodges a cycle at import time is
# still a cycle in the design); the same reading gives the figures of scripts/layout_figures.py
from scripts.layout_figures import frontend_import_graph  # noqa: E402


def _find_cycle(graph: dict[str, set[str]]):
    """One cycle of the graph as a list of nodes (first == last), or None."""
    state = {}      # node -> "open" while on the DFS path, "done" after

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt, path)
                if cycle:
                    return cycle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def test_find_cycle_names_it():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_frontend_import_graph_is_acyclic():
    """Handler modules reach each other through dispatch.py's tables, never in a circle."""
    graph = frontend_import_graph()
    cycle = _find_cycle(graph)
    assert cycle is None, "frontend import cycle: " + " -> ".join(f"{m}.py" for m in cycle)
