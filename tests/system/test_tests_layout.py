"""The tests are laid out like the package (issue 54, item 4): ``tests/<package>/test_*.py`` holds
the tests of ``pipeline/<package>/``, ``tests/system/`` the tests that span many packages and
``tests/scripts/`` those of ``scripts/``; what tests share sits in ``tests/helpers/``; nothing in
``scripts/`` imports from ``tests/``. Each check is also run on a planted layout that breaks it."""

import ast
import re
from pathlib import Path

from tests.helpers.paths import REPO

EXTRA_FOLDERS = ("system", "scripts")


def misplaced_tests(root: Path) -> list[str]:
    """Test files not in ``tests/<folder>/`` with ``folder`` a package of ``pipeline/`` or one of
    ``EXTRA_FOLDERS``, and test folders without an ``__init__.py``."""
    pkgs = {p.parent.name for p in (root / "pipeline").glob("*/__init__.py")}
    out = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        rel = path.relative_to(root / "tests")
        if "data" in rel.parts:
            continue
        if len(rel.parts) != 2 or rel.parts[0] not in pkgs | set(EXTRA_FOLDERS):
            out.append(f"tests/{rel.as_posix()}")
        elif not (path.parent / "__init__.py").exists():
            out.append(f"tests/{rel.parts[0]}/__init__.py missing")
    return out


def script_imports_from_tests(root: Path) -> list[str]:
    """Imports in ``scripts/`` of a module of ``tests/`` (``tests.*``, ``conftest``, a helper's
    bare name) and ``sys.path`` entries that name the tests folder."""
    bare = {"conftest", *(p.stem for p in (root / "tests").rglob("*.py"))}
    out = []
    for path in sorted((root / "scripts").rglob("*.py")):
        rel, text = path.relative_to(root).as_posix(), path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            out += [
                f"{rel}:{node.lineno} {n}"
                for n in names
                if n.split(".")[0] == "tests" or n.split(".")[0] in bare - {"__init__"}
            ]
        for i, line in enumerate(text.splitlines(), 1):
            if re.search(r"sys\.path\.(insert|append)\(.*[\"']tests[\"']", line):
                out.append(f"{rel}:{i} sys.path")
    return out


def test_every_test_file_sits_in_its_package_folder():
    assert misplaced_tests(REPO) == []


def test_no_script_imports_from_tests():
    assert script_imports_from_tests(REPO) == []


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_misplaced_test_file_is_found(tmp_path):
    for rel in ("pipeline/ops/__init__.py", "tests/ops/__init__.py", "tests/system/__init__.py"):
        _write(tmp_path, rel)
    for rel in ("ops/test_a.py", "system/test_b.py", "test_top.py", "nothing/test_c.py"):
        _write(tmp_path, f"tests/{rel}")
    _write(tmp_path, "tests/scripts/test_d.py")  # a folder without __init__.py
    _write(tmp_path, "tests/data/store/test_fixture.py")  # test data is not a test
    assert misplaced_tests(tmp_path) == [
        "tests/nothing/test_c.py",
        "tests/scripts/__init__.py missing",
        "tests/test_top.py",
    ]


def test_a_script_importing_from_tests_is_found(tmp_path):
    _write(tmp_path, "tests/helpers/reference.py")
    _write(tmp_path, "scripts/ok.py", "import sys\nfrom pipeline.ops import ppr\n")
    _write(
        tmp_path,
        "scripts/bench/bad.py",
        'import sys\nsys.path.insert(0, str(ROOT / "tests"))\nfrom reference import f\n'
        "def g():\n    from tests.helpers.reference import f\n    import conftest\n",
    )
    assert script_imports_from_tests(tmp_path) == [
        "scripts/bench/bad.py:3 reference",
        "scripts/bench/bad.py:5 tests.helpers.reference",
        "scripts/bench/bad.py:6 conftest",
        "scripts/bench/bad.py:2 sys.path",
    ]
