"""No import circles in ``pipeline/`` (issue 15): every ``import`` and ``from … import`` of a
``pipeline`` module — at the top of a file or inside a function — is an edge, and the graph must
have no cycle. A planted circle is found, so the walk itself is tested too."""

import ast
from pathlib import Path

from tests.helpers.paths import REPO


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str = "pipeline") -> dict[str, set[str]]:
    """{module: the package modules it imports}; ``from a import b`` names ``a.b`` when that is a
    module, else ``a``; relative imports are resolved against the importing module's package."""
    files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (
                    ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1])
                    if node.level
                    else ""
                )
                src = ".".join(x for x in (base, node.module) if x)
                targets = [
                    f"{src}.{a.name}" if f"{src}.{a.name}" in files else src for a in node.names
                ]
            else:
                continue
            for t in targets:
                while t and t not in files:  # import a.b.c → the deepest module that exists
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_pipeline_has_no_import_cycle():
    assert cycles(import_graph(REPO)) == []


def test_a_planted_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pipeline"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pipeline.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (pkg / "c.py").write_text("import pipeline.a\n")
    (pkg / "d.py").write_text("from pipeline import a\n")
    assert cycles(import_graph(tmp_path)) == [["pipeline.a", "pipeline.c", "pipeline.sub.b"]]
