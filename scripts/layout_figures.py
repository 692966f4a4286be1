"""Layout figures for the closing notes of refactoring issues (issue 15), read with `ast` only:
the largest function in compiler/ (by lines), the number of function-local imports in
compiler/frontend, the largest import cycle among frontend files (the largest strongly connected
component of the file-level import graph, function-local imports counted), and file sizes.

    python scripts/layout_figures.py
"""
import ast
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPILER = REPO / "compiler"
FRONTEND = COMPILER / "frontend"
PACKAGE = "tracetorch.compiler.frontend"


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def largest_function():
    best = (0, "")
    for path in sorted(COMPILER.rglob("*.py")):
        for fn in _functions(ast.parse(path.read_text())):
            best = max(best, (fn.end_lineno - fn.lineno + 1, f"{path.relative_to(REPO)}:{fn.name}"))
    return best


def function_local_imports(folder=FRONTEND):
    count = 0
    for path in folder.glob("*.py"):
        for fn in _functions(ast.parse(path.read_text())):
            # only the function's own body, not nested functions (counted on their own)
            stack = list(fn.body)
            while stack:
                node = stack.pop()
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    count += 1
                elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    stack.extend(ast.iter_child_nodes(node))
    return count


def frontend_import_graph(folder=FRONTEND, package=PACKAGE):
    """{module: set(modules it imports)} among the folder's files, every import statement counted
    (module-level, function-local, under `if TYPE_CHECKING`)."""
    names = {p.stem for p in folder.glob("*.py")}
    graph = {}
    for path in folder.glob("*.py"):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 1:
                    base = f"{package}.{base}".rstrip(".")
                if base == package:
                    targets = [a.name for a in node.names]
                elif base.startswith(package + "."):
                    targets = [base[len(package) + 1:].split(".")[0]]
            elif isinstance(node, ast.Import):
                targets = [a.name[len(package) + 1:].split(".")[0] for a in node.names
                           if a.name.startswith(package + ".")]
            edges.update(t for t in targets if t in names and t != path.stem)
        graph[path.stem] = edges
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm; components of more than one module, largest first."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def main():
    lines, name = largest_function()
    cycles = strongly_connected(frontend_import_graph())
    sizes = [len(p.read_text().splitlines()) for p in COMPILER.rglob("*.py")]
    front = [len(p.read_text().splitlines()) for p in FRONTEND.glob("*.py")]
    rows = [
        ("largest function in compiler/ (lines)", f"{lines} ({name})"),
        ("function-local imports in compiler/frontend", function_local_imports()),
        ("largest frontend import cycle (files)", len(cycles[0]) if cycles else 0),
        ("  its files", ", ".join(cycles[0]) if cycles else "-"),
        ("frontend files in cycles", sum(len(c) for c in cycles)),
        ("compiler/ files / median / max lines", f"{len(sizes)} / {statistics.median(sizes):g} / {max(sizes)}"),
        ("frontend files / median / max lines", f"{len(front)} / {statistics.median(front):g} / {max(front)}"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
