"""Where the tests' inputs are: the checkout, the bundled fixtures under tests/data, the benchmark
data (``RECALL_DATA_DIR``, else ../shared/data), and the overrides that point ``data=`` at the tiny
workspace fixture."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS_DATA = REPO / "tests" / "data"
SHARED_DATA = Path(os.environ.get("RECALL_DATA_DIR", REPO.parent / "shared" / "data"))
TINY_WS = TESTS_DATA / "workspace_tiny"


def tiny_ws_overrides() -> list[str]:
    """Hydra overrides that read the tiny workspace fixture (notes, queries, qrels)."""
    return [
        "data=workspace",
        f"data.path={TINY_WS / 'notes'}",
        f"data.queries={TINY_WS / 'queries.jsonl'}",
        f"data.qrels={TINY_WS / 'qrels.tsv'}",
    ]


def needs_shared(path: Path):
    """A skip mark for a test that reads benchmark data at ``path`` when it is not there."""
    return pytest.mark.skipif(not path.exists(), reason=f"benchmark data not found at {path}")
