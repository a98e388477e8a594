"""The threshold registry (``pipeline.core.thresholds``) is complete: every module-level integer constant
in ``pipeline/`` and every batch- or block-size key in ``conf/`` is a registered threshold (which
the differential harness must cross: tests/system/test_differential.py) or is listed as no size, with a
reason. A new constant fails here until someone decides which it is."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import yaml

from pipeline.core.thresholds import BATCH_KEYS, NOT_SIZES, THRESHOLDS
from tests.helpers.paths import REPO

REGISTERED = {f"{t.module}.{t.name}" for t in THRESHOLDS}


def _is_int(node: ast.expr) -> bool:
    """An integer literal, or arithmetic on integer literals (``1 << 20``, ``86_400 * 10**6``)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.BinOp):
        return _is_int(node.left) and _is_int(node.right)
    if isinstance(node, ast.UnaryOp):
        return _is_int(node.operand)
    return False


def int_constants(path: Path) -> list[str]:
    """Module-level UPPER_CASE names bound to integer constants (tuple assignments included)."""
    out = []
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for t in targets:
            pairs = (
                zip(t.elts, value.elts)
                if isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple)
                else [(t, value)]
            )
            for name, v in pairs:
                if isinstance(name, ast.Name) and name.id.isupper() and _is_int(v):
                    out.append(name.id)
    return out


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def test_the_scan_finds_the_known_thresholds(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("A, B = 64, 1 << 16\nC: int = -3\nD = 0.5\nE = 'x'\nlower = 3\nF = G = 2\n")
    assert int_constants(src) == ["A", "B", "C", "F", "G"]
    found = {
        f"{module_name(p)}.{n}" for p in (REPO / "pipeline").rglob("*.py") for n in int_constants(p)
    }
    assert {"pipeline.ops.dpp.GRAM_MAX_P", "pipeline.ops.ppr.DENSE_WORK"} <= found


def test_every_int_constant_is_a_registered_threshold_or_no_size():
    unknown = []
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        for name in int_constants(path):
            full = f"{module_name(path)}.{name}"
            if full not in REGISTERED and full not in NOT_SIZES:
                unknown.append(full)
    assert not unknown, (
        f"{unknown}: add each to pipeline/core/thresholds.py — THRESHOLDS (a size a branch compares "
        "with; make tests/helpers/differential_corpus.py cross it) or NOT_SIZES (with the reason)"
    )


def _keys(node, prefix=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield f"{prefix}{k}", v
            yield from _keys(v, f"{prefix}{k}.")


def test_every_batch_key_of_conf_is_registered():
    unknown = []
    for path in sorted((REPO / "conf").rglob("*.yaml")):
        group = path.parent.name
        for key, v in _keys(yaml.safe_load(path.read_text()) or {}):
            if key.split(".")[-1] in BATCH_KEYS and isinstance(v, int):
                full = f"conf:{group}.{key}"
                if f"conf.{group}.{key}" not in REGISTERED and full not in NOT_SIZES:
                    unknown.append(f"{full} ({path.relative_to(REPO)})")
    assert not unknown, f"{unknown}: register them in pipeline/core/thresholds.py"


def test_every_registered_threshold_exists():
    import faiss

    for t in THRESHOLDS:
        if t.module == "faiss":
            assert isinstance(faiss.cvar.distance_compute_blas_threshold, int)
        elif t.module == "conf":
            group, key = t.name.split(".", 1)
            files = list((REPO / "conf" / group).glob("*.yaml"))
            assert any(dict(_keys(yaml.safe_load(f.read_text()) or {})).get(key) for f in files), t
        elif "." in t.name:  # a function's default
            fn, arg = t.name.split(".")
            import inspect

            sig = inspect.signature(getattr(importlib.import_module(t.module), fn))
            assert isinstance(sig.parameters[arg].default, int), t
        else:
            assert isinstance(getattr(importlib.import_module(t.module), t.name), int), t
    assert {t.crossed for t in THRESHOLDS} <= {"data", "patched", "config", "model", "cuda"}
    for name in NOT_SIZES:
        assert name not in REGISTERED, name
