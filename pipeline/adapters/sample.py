"""The bundled demo workspaces (``pipeline/resources/sample``, its Chinese translation ``sample_zh``):
notes, queries and judged notes."""

from __future__ import annotations

from pathlib import Path

from pipeline.adapters import workspace
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import ConfigError

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
BUNDLED = ("sample", "sample_zh")


def load(
    path: str | None = None,
    *,
    name: str = "sample",
    limit_queries: int | None = None,
    importance_scale: str = "auto",
) -> Dataset:
    """A bundled workspace (``sample``, ``sample_zh``) or one at ``path``: notes, queries.jsonl and qrels.tsv."""
    if not path and name not in BUNDLED:
        raise ConfigError(
            f"data.name={name!r} is not a bundled workspace; choose from {list(BUNDLED)} or set data.path"
        )
    root = Path(path) if path else RESOURCES / name
    return workspace.load(
        str(root / "notes"),
        name=name,
        queries=str(root / "queries.jsonl"),
        qrels=str(root / "qrels.tsv"),
        limit_queries=limit_queries,
        importance_scale=importance_scale,
    )
