"""Selection: the final top-k per query, by score (``topk``) or diversified (``dpp``, ``mmr``).

DPP (BME): pool = the first ``pool_mult·k`` candidates by score, quality = score, kernel
``diag(q)·cos·diag(q)``, greedy MAP batched over all queries (``pipeline.ops.dpp``); the output
order is the greedy order and ``dpp_gain`` holds each pick's marginal gain. MMR is the alternative.
Ties are broken by node index (= node_id order) everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.errors import ConfigError, choose
from pipeline.stages.spread import spread

METHODS = ("topk", "dpp", "mmr")


@dataclass
class SelectParams:
    method: str = "topk"
    pool_mult: int = 3
    quality_weight: float = 1.0  # dpp
    lam: float = 0.7  # mmr
    batch: int = 4096  # queries per torch batch
    dtype: str = "float32"  # float64 for bit-for-bit parity with the float64 reference kernels
    top_chunks_per_doc: int | None = None  # ReMe node-level grouping: at most this many units per doc_id
    sort_by: tuple = ()  # priority columns sorted desc before the score (BME scope/story buckets)
    spread_gap: float = 0.0  # > 0: repeated doc_ids pushed down this many positions each (pipeline.stages.spread)

    def __post_init__(self) -> None:  # read with getattr(torch, dtype): a closed choice, not any attribute
        choose("select.dtype", self.dtype, ("float32", "float64"))


def ranked(cand: pl.DataFrame, sort_by: tuple = ()) -> pl.DataFrame:
    """Candidates sorted per query by the ``sort_by`` columns desc, score desc, node index asc,
    with a 1-based ``rank``."""
    keys = [c for c in sort_by if c in cand.columns]
    return (cand.sort(["query_idx", *keys, "score", "node_idx"], descending=[False, *[True] * len(keys), True, False])
            .with_columns(rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32)))


def group_by_doc(r: pl.DataFrame, doc_idx: np.ndarray, per_doc: int) -> pl.DataFrame:
    """ReMe node-level grouping: keep each doc's best ``per_doc`` units; documents ordered by their
    best unit, units by score inside a document; ranks renumbered. ``doc_idx`` maps node → doc."""
    g = (r.with_columns(doc=pl.Series(doc_idx[r["node_idx"].to_numpy()]))
         .with_columns(in_doc=pl.col("rank").rank("ordinal").over("query_idx", "doc"),
                       doc_best=pl.col("rank").min().over("query_idx", "doc"))
         .filter(pl.col("in_doc") <= per_doc)
         .sort(["query_idx", "doc_best", "rank"]))
    return g.drop("in_doc", "doc_best", "doc").with_columns(
        rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32))


def select(cand: pl.DataFrame, k: int, p: SelectParams, xb: np.ndarray | None = None, device: str = "cpu",
           doc_idx: np.ndarray | None = None) -> pl.DataFrame:
    choose("select.method", p.method, METHODS)
    r = ranked(cand, tuple(p.sort_by))
    if p.top_chunks_per_doc:
        if doc_idx is None:
            raise ConfigError("select.top_chunks_per_doc needs a doc_id column in the nodes")
        r = group_by_doc(r, doc_idx, int(p.top_chunks_per_doc))
    r = spread(r, doc_idx, float(p.spread_gap))
    if p.method == "topk" or r.height == 0:
        return r.filter(pl.col("rank") <= k)
    if xb is None:
        raise ConfigError(f"select.method={p.method} needs embeddings: enable the dense channel or use select=topk")
    import torch

    from pipeline.ops.dpp import dpp_greedy, mmr_greedy

    pool = r.filter(pl.col("rank") <= p.pool_mult * k)
    qids = pool["query_idx"].unique(maintain_order=True).to_numpy()
    row = np.searchsorted(qids, pool["query_idx"].to_numpy())
    col = pool["rank"].to_numpy() - 1
    width = int(col.max()) + 1
    node = np.full((len(qids), width), -1, np.int64)
    score = np.zeros((len(qids), width), np.float64)
    node[row, col] = pool["node_idx"].to_numpy()
    score[row, col] = pool["score"].to_numpy()
    picks, gains = [], []
    for s in range(0, len(qids), p.batch):
        e = slice(s, s + p.batch)
        valid = torch.as_tensor(node[e] >= 0, device=device)
        emb = torch.as_tensor(xb[np.maximum(node[e], 0)], device=device)
        q = torch.as_tensor(score[e], device=device)
        if p.method == "dpp":
            sel, gain = dpp_greedy(q, emb, k, valid, quality_weight=p.quality_weight, dtype=getattr(torch, p.dtype))
        else:
            sel, gain = mmr_greedy(q, emb, k, p.lam, valid, dtype=getattr(torch, p.dtype)), None
        picks.append(sel.cpu().numpy())
        gains.append(np.full(sel.shape, np.nan) if gain is None else gain.cpu().numpy())
    sel, gain = np.concatenate(picks), np.concatenate(gains)
    qi, step = np.nonzero(sel >= 0)
    chosen = pl.DataFrame({"query_idx": qids[qi], "node_idx": node[qi, sel[qi, step]],
                           "rank": (step + 1).astype(np.int32), "dpp_gain": gain[qi, step]})
    return chosen.join(pool.drop("rank"), on=["query_idx", "node_idx"], how="left").sort(["query_idx", "rank"])
