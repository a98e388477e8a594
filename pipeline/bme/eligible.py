"""BME's "eligible anchor node" rule (residual basis, co-occurrence index and supplemental anchors)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl


def eligible(
    nodes: pl.DataFrame, require_title: bool = True, exclude_types: Sequence[str] = ()
) -> np.ndarray:
    """Boolean mask over nodes: not archived, type not in ``exclude_types``, and (when
    ``require_title``) a trimmed title of at least 2 characters."""
    ok = np.ones(nodes.height, dtype=bool)
    if "archived" in nodes.columns:
        ok &= ~nodes["archived"].fill_null(False).to_numpy()
    if "type" in nodes.columns and exclude_types:
        ok &= ~nodes["type"].is_in(list(exclude_types)).fill_null(False).to_numpy()
    if require_title:
        ok &= (
            (nodes["title"].fill_null("").str.strip_chars().str.len_chars() >= 2).to_numpy()
            if "title" in nodes.columns
            else False
        )
    return ok
