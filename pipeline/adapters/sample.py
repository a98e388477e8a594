"""The bundled demo workspace (``pipeline/resources/sample``): notes, queries and judged notes."""
from __future__ import annotations

from pathlib import Path

from pipeline.adapters import workspace
from pipeline.dataset import Dataset

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "resources" / "sample"


def load(path: str | None = None, *, name: str = "sample", limit_queries: int | None = None,
         importance_scale: str = "auto") -> Dataset:
    root = Path(path) if path else SAMPLE_DIR
    return workspace.load(str(root / "notes"), name=name, queries=str(root / "queries.jsonl"),
                          qrels=str(root / "qrels.tsv"), limit_queries=limit_queries,
                          importance_scale=importance_scale)
