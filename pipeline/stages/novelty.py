"""BME's residual-novelty recall (docs/presets.md, ``bme``), batched over queries.

Per query: basis = its eligible dense hits in dense-rank order (non-archived, type not excluded,
with a title unless ``require_title`` is off), at most ``basis_max``, at least ``basis_min`` (else
skipped with a reason). NMF novelty gate (``novelty ≥ novelty_threshold``), then a FISTA sparse code
of the query on the basis; if ``‖r‖ > residual_threshold`` the ``residual_top_k`` nodes outside the
basis most similar to the residual ``r`` are the residual hits. Every query gets a row in
``novelty.parquet``; hits go back to the runner as a ``residual`` candidate column.
BME's exact-name anchors are not part of the basis here (they need the anchor layer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.bme.eligible import eligible as eligible_nodes
from pipeline.contract.errors import ConfigError
from pipeline.core.stage import Params, Stage
from pipeline.ops.scope import scope_groups
from pipeline.ops.topk import topk_long


@dataclass(frozen=True)
class NoveltyParams(Params):
    """Novelty gate settings: NMF basis, FISTA residual and thresholds."""

    GROUP: ClassVar[str] = "novelty"
    OPTION: ClassVar[str] = "none"  # what Params.defaults() loads
    enabled: bool
    basis_max: int
    basis_min: int
    topics: int
    novelty_threshold: float
    residual_threshold: float
    residual_top_k: int
    lam: float
    fista_iter: int
    max_iter: int
    tol: float
    mode: str  # abs (BME) | shift | split: how signed embeddings become NMF input
    require_title: bool  # BME: basis nodes need a name/title
    exclude_types: list
    batch: int
    include_archived: bool = field(default=False, metadata={"runtime": True})  # the run's rule


def eligible(nodes: pl.DataFrame, p: NoveltyParams) -> np.ndarray:
    """Boolean mask of the nodes the novelty gate may use (``require_title``, ``exclude_types``)."""
    return eligible_nodes(nodes, p.require_title, p.exclude_types)


def run(
    cand: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    xb: np.ndarray,
    xq: np.ndarray,
    p: NoveltyParams,
    device: str = "cpu",
    include_archived: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Returns (per-query analysis frame, residual hits: query_idx, node_idx, residual)."""
    basis = _basis(cand, eligible(nodes, p), p)
    m_of = dict(basis.group_by("query_idx").len().iter_rows())
    nq = queries.height
    m = np.array([m_of.get(q, 0) for q in range(nq)])
    rows_of = basis.group_by("query_idx", maintain_order=True).agg("node_idx")
    basis_nodes = dict(zip(rows_of["query_idx"].to_list(), rows_of["node_idx"].to_list()))
    stats, residuals = _gates(xb, xq, m, basis_nodes, p, device)
    passed_nov = stats["novelty"] >= p.novelty_threshold
    passed_res = passed_nov & (stats["residual_norm"] > p.residual_threshold)
    hits = _residual_hits(
        nodes, queries, xb, residuals, np.flatnonzero(passed_res), basis_nodes, p, include_archived
    )
    reason = np.where(
        m < p.basis_min,
        "basis_too_small",
        np.where(
            ~passed_nov,
            "novelty_below_threshold",
            np.where(~passed_res, "residual_below_threshold", ""),
        ),
    )
    hit_lists = hits.group_by("query_idx").agg("node_idx")
    hl = dict(zip(hit_lists["query_idx"].to_list(), hit_lists["node_idx"].to_list()))
    ids = nodes["node_id"].to_numpy()
    table = pl.DataFrame(
        {
            "query_id": queries["query_id"],
            "basis_size": m.astype(np.int32),
            **{k: v for k, v in stats.items()},
            "novelty_gate": passed_nov,
            "residual_gate": passed_res,
            "skip_reason": pl.Series(reason).replace("", None),
            "residual_hits": [[str(x) for x in ids[hl.get(q, [])]] for q in range(nq)],
        }
    )
    return table, hits


def _basis(cand: pl.DataFrame, ok: np.ndarray, p: NoveltyParams) -> pl.DataFrame:
    """Each query's basis: its first ``basis_max`` eligible dense hits, in dense rank order."""
    return (
        cand.filter(pl.col("dense_rank").is_not_null())
        .filter(
            pl.Series(ok[cand.filter(pl.col("dense_rank").is_not_null())["node_idx"].to_numpy()])
        )
        .sort(["query_idx", "dense_rank"])
        .group_by("query_idx", maintain_order=True)
        .head(p.basis_max)
    )


def _gates(
    xb: np.ndarray, xq: np.ndarray, m: np.ndarray, basis_nodes: dict, p: NoveltyParams, device: str
) -> tuple[dict, np.ndarray]:
    """(per-query novelty / semantic_depth / topic_coverage / residual_norm, residual vectors):
    NMF novelty and the FISTA residual of every query with a large enough basis, in batches.

    A query's bits depend on its own basis only: a batch holds queries of one basis size ``m`` (no
    padding, so every tensor of a member has the shape its own ``m`` gives), at most ``p.batch`` of
    them and at least :data:`~pipeline.ops.dpp.MIN_ROWS` rows (a batch of one is padded with copies
    of its query, whose results are dropped; torch reduces a single row by another kernel)."""
    from pipeline.ops.dpp import MIN_ROWS

    nq = len(m)
    run_q = np.flatnonzero(m >= p.basis_min)
    stats = {
        k: np.full(nq, np.nan)
        for k in ("novelty", "semantic_depth", "topic_coverage", "residual_norm")
    }
    residuals = np.zeros((nq, xb.shape[1]), np.float32)
    for width in np.unique(m[run_q]):
        same = run_q[m[run_q] == width]
        for s in range(0, len(same), p.batch):
            qs = same[s : s + p.batch]
            pad = np.concatenate([qs, np.repeat(qs[:1], max(0, MIN_ROWS - len(qs)))])
            got, r = _gate_batch(np.stack([basis_nodes[q] for q in pad]), xb, xq[pad], p, device)
            for key, v in got.items():
                stats[key][qs] = v[: len(qs)]
            residuals[qs] = r[: len(qs)]
    return stats, residuals


def _gate_batch(
    rows: np.ndarray, xb: np.ndarray, q: np.ndarray, p: NoveltyParams, device: str
) -> tuple[dict, np.ndarray]:
    """NMF novelty and FISTA residual of one batch of same-size bases ``xb[rows]`` (rows (B, m)),
    queries q (B, d); rows and topics padded (zero) to widths fixed by (m, d) (``padded_rows``)."""
    import torch  # deferred: runs without the novelty gate never load torch

    from pipeline.ops.fista import fista_batched
    from pipeline.ops.nmf import ALIGN, nmf_batched, novelty_batched, padded_rows, prepare_basis

    B, m = rows.shape
    E = np.zeros((B, padded_rows(m, xb.shape[1]), xb.shape[1]), np.float32)
    E[:, :m] = xb[rows]
    Et, qt = torch.as_tensor(E, device=device), torch.as_tensor(q, device=device)
    mt = torch.full((B,), m, device=device)
    V, qv = prepare_basis(Et, p.mode, q=qt, m=mt)
    _W, H, _info = nmf_batched(V, mt, mt.clamp(max=p.topics), p.max_iter, p.tol, k_width=ALIGN)
    nov = novelty_batched(H, mt.clamp(max=p.topics), qv)
    _alpha, r = fista_batched(Et, mt, qt, p.lam, p.fista_iter)
    keys = ("novelty", "semantic_depth", "topic_coverage")
    stats = {k: nov[k].double().cpu().numpy() for k in keys}
    stats["residual_norm"] = r.norm(dim=1).double().cpu().numpy()
    return stats, r.float().cpu().numpy()


def _residual_hits(
    nodes, queries, xb, residuals, qs_pass, basis_nodes, p, include_archived
) -> pl.DataFrame:
    """Top cosine(r, node) > 0 among the query's visible nodes outside its basis."""
    out = []
    passing = set(qs_pass.tolist())
    for _key, rows, qs in scope_groups(nodes, queries, include_archived):
        qs = np.array([q for q in qs if q in passing], dtype=np.int64)
        if len(qs) == 0 or len(rows) == 0:
            continue
        r = residuals[qs]
        r = r / np.maximum(np.linalg.norm(r, axis=1, keepdims=True), 1e-10)
        sim = r @ xb[rows].T
        for j, q in enumerate(qs):
            sim[j, np.isin(rows, basis_nodes.get(q, []))] = -np.inf
        qi, di = np.nonzero(sim > 0)
        qi2, di2, sc, _rank = topk_long(qi, di, sim[qi, di].astype(np.float32), p.residual_top_k)
        out.append(pl.DataFrame({"query_idx": qs[qi2], "node_idx": rows[di2], "residual": sc}))
    schema = {"query_idx": pl.Int64, "node_idx": pl.Int64, "residual": pl.Float32}
    return pl.concat(out).cast(schema) if out else pl.DataFrame(schema=schema)


def run_stage(ctx, p: NoveltyParams) -> object:
    """The novelty table of the group's queries, and their residual hits as a ``residual`` component."""
    from pipeline.stages.fuse import join_component

    if ctx.xb is None:
        raise ConfigError("novelty.enabled needs embeddings: enable the dense channel")
    ctx.novelty, hits = run(
        ctx.cand,
        ctx.nodes,
        ctx.queries,
        ctx.xb,
        ctx.xq,
        p,
        ctx.run.device,
        p.include_archived,
    )
    ctx.cand = join_component(ctx, hits, "residual")
    ctx.run.log.add("residual_hits", hits.height)
    return ctx


STAGE = Stage(
    "novelty",
    run_stage,
    enabled=lambda cfg: bool(cfg.novelty.enabled),
    params=lambda run: NoveltyParams.from_cfg(
        run.cfg.novelty, "novelty", include_archived=bool(run.cfg.include_archived)
    ),
)
