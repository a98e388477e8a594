"""ST-BME probabilistic recall (docs/presets.md, ``bme``), seeded: same seed, same output.

For each query with fewer than ``k`` recalled nodes: among the nodes it may see that were not
selected, with importance ≥ ``min_importance`` and type not ``synopsis``/``rule``, the 3 most
important are each appended with probability clip(p, 0.01, 0.5). The draw for a query comes from a
generator seeded by (seed, query_id), so it does not depend on the other queries of the batch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.core.stage import Params
from pipeline.ops.scope import scope_groups


@dataclass(frozen=True)
class ProbRecallParams(Params):
    """The ``prob_recall`` group: on or off, the append probability and the importance floor."""

    GROUP: ClassVar[str] = "prob_recall"
    enabled: bool
    p: float
    min_importance: float


def _rng(seed: int, query_id: str) -> np.random.Generator:
    h = hashlib.sha256(f"{seed}\0{query_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def append(
    sel: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    k: int,
    *,
    p: float = 0.15,
    min_importance: float = 6.0,
    top: int = 3,
    seed: int = 13,
    include_archived: bool = False,
) -> pl.DataFrame:
    """``sel`` (query_idx, node_idx, rank, …) with the drawn nodes appended (``probabilistic`` = True)."""
    if "importance" not in nodes.columns:
        return sel.with_columns(probabilistic=pl.lit(False))
    prob = min(max(p, 0.01), 0.5)
    imp = nodes["importance"].fill_null(5.0).to_numpy()
    typ = (
        nodes["type"].fill_null("").to_numpy()
        if "type" in nodes.columns
        else np.full(nodes.height, "")
    )
    ok_all = (imp >= min_importance) & ~np.isin(typ, ["synopsis", "rule"])
    taken = sel.group_by("query_idx").agg("node_idx", pl.col("rank").max().alias("last"))
    taken = {q: (set(n), last) for q, n, last in taken.iter_rows()}
    qids = queries["query_id"].to_list()
    rows = []
    for _key, visible, qs in scope_groups(nodes, queries, include_archived):
        pool = visible[ok_all[visible]]
        pool = pool[np.lexsort((pool, -imp[pool]))]  # importance desc, then node order
        for q in qs:
            chosen, last = taken.get(int(q), (set(), 0))
            if len(chosen) >= k:
                continue
            cands = [int(n) for n in pool if int(n) not in chosen][:top]
            draws = _rng(seed, qids[int(q)]).random(len(cands))
            for n, u in zip(cands, draws):
                if u < prob and last < k:
                    last += 1
                    rows.append((int(q), n, last))
    extra = pl.DataFrame(
        rows, schema={"query_idx": pl.Int64, "node_idx": pl.Int64, "rank": pl.Int32}, orient="row"
    )
    return pl.concat(
        [
            sel.with_columns(probabilistic=pl.lit(False)),
            extra.with_columns(probabilistic=pl.lit(True), score=pl.lit(0.0)),
        ],
        how="diagonal_relaxed",
    ).sort("query_idx", "rank")
