"""House rules that check themselves (issue 15): no function in ``pipeline/`` over 60 lines, the
runner a page long, every stage of the query path behind the one interface."""

import ast

from pipeline.core.stage import Stage
from pipeline.run import querypath
from tests.helpers.paths import REPO

MAX_FUNCTION_LINES = 60


def long_functions(root) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)"
                    )
    return out


def test_no_function_in_pipeline_is_over_60_lines():
    assert long_functions(REPO / "pipeline") == []


def test_a_long_function_is_reported(tmp_path):
    pkg = tmp_path / "pipeline"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n" + "    x = 1\n" * 60 + "\n\ndef g():\n    return 1\n")
    assert long_functions(pkg) == ["pipeline/m.py:1 f (61 lines)"]


def test_the_runner_is_at_most_150_lines():
    assert len((REPO / "pipeline" / "run" / "runner.py").read_text().splitlines()) <= 150


def test_every_query_stage_uses_the_stage_interface_and_is_named_once():
    assert all(isinstance(s, Stage) for s in querypath.STAGES)
    names = [s.name for s in querypath.STAGES]
    assert names == [
        "channels",
        "fuse",
        "oks_backend",
        "novelty",
        "graph",
        "signals",
        "diffuse",
        "cooccur",
        "score",
        "select",
    ]
