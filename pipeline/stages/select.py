"""Selection: the final top-k per query, by score (``topk``) or diversified (``dpp``, ``mmr``).

DPP (BME): target t = ``target`` (BME's ``llmCandidatePool`` 30) or k; pool = the first
``pool_mult·t`` candidates by score, quality = score (with a scope policy, the score before its
factors: BME's ``finalScore``), kernel ``diag(q)·cos·diag(q)``, greedy MAP
batched over all queries (``pipeline.ops.dpp``); min(t, k) picks in greedy order (``dpp_gain`` =
each pick's marginal gain), then the rest of the list in score order up to k. As in BME, a query
whose pool is not larger than t keeps its score order. MMR is the alternative.
Ties are broken by node index (= node_id order) everywhere, after the ``tie_break`` rank columns
when given (preset reme: ``[dense_rank, lexical_rank]``, the order ReMe's stable sorts leave equal
scores in: its vector list, then keyword-only hits in keyword order).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from pipeline.channels import dense
from pipeline.contract.errors import ConfigError, require_int, require_one_of
from pipeline.core import backend
from pipeline.core.stage import Params, Stage
from pipeline.ops import scoring
from pipeline.stages.spread import spread

METHODS = ("topk", "dpp", "mmr")
GAIN_DTYPE = {"float32": pl.Float32, "float64": pl.Float64}


@dataclass(frozen=True)
class SelectParams(Params):
    """Selection settings: method (topk, dpp, mmr), pool and per-document limits."""

    GROUP: ClassVar[str] = "select"
    OPTION: ClassVar[str] = "topk"  # what Params.defaults() loads
    method: str
    pool_mult: int
    quality_weight: float  # dpp
    lam: float  # mmr
    batch: int  # queries per torch batch
    dtype: str  # float64 for bit-for-bit parity with the float64 reference kernels
    top_chunks_per_doc: int | None  # ReMe node-level grouping: at most this many units per doc_id
    target: (
        int | None
    )  # dpp/mmr: items diversified out of target·pool_mult (BME: 30 of 90); null = k
    k_in_docs: bool  # with top_chunks_per_doc: k counts documents (ReMe design: paths), not units
    doc_window: int | None  # k_in_docs: the documents among the first doc_window·k rows (OKS: 4)
    spread_gap: (
        float  # > 0: repeated doc_ids pushed down this many positions each (pipeline.stages.spread)
    )
    tie_break: tuple = ()  # rank columns ordering equal scores, ascending, missing last
    sort_by: tuple = field(
        default=(), metadata={"runtime": True}
    )  # the scope policy's priority columns, set by the score stage
    # the run's, filled by :meth:`of` (the select stage reads nothing else):
    k: int = field(default=10, metadata={"runtime": True})  # results per query
    channels: tuple = field(default=(), metadata={"runtime": True})  # the enabled channels
    columns: tuple = field(default=(), metadata={"runtime": True})  # the registered score terms'
    prob_recall: Any = field(default=None, metadata={"runtime": True})  # ProbRecallParams or None
    seed: int = field(default=0, metadata={"runtime": True})  # probabilistic recall's seed
    include_archived: bool = field(default=False, metadata={"runtime": True})
    dense_index: str | None = field(default=None, metadata={"runtime": True})  # dense.resident

    @classmethod
    def of(cls, run) -> SelectParams:
        """The ``select`` group with the run's ``k``, channels, score term columns, probabilistic
        recall (``prob_recall``, when enabled), ``seed``, ``include_archived`` and ``dense.index``."""
        from pipeline.stages.probrecall import ProbRecallParams
        from pipeline.stages.score import term_columns

        cfg = run.cfg
        prob = cfg.prob_recall
        return cls.from_cfg(
            cfg.select,
            "select",
            k=require_int("k", cfg.k, 1),
            channels=tuple(cfg.channels),
            columns=tuple(term_columns(dict(cfg.score.terms), list(cfg.score.factors))),
            prob_recall=ProbRecallParams.from_cfg(prob, "prob_recall") if prob.enabled else None,
            seed=cfg.seed,
            include_archived=cfg.include_archived,
            dense_index=cfg.dense.get("index"),
        )

    def __post_init__(
        self,
    ) -> None:  # read with getattr(torch, dtype): a closed choice, not any attribute
        require_one_of("select.dtype", self.dtype, ("float32", "float64"))


def ranked(cand: pl.DataFrame, sort_by: tuple = (), tie_break: tuple = ()) -> pl.DataFrame:
    """Candidates sorted per query by the ``sort_by`` columns desc, score desc, ``tie`` asc where
    the candidates have it (``stages.oks_backend``: OKS's order of equal scores), the
    ``tie_break`` columns asc (a missing value after every value), node index asc, with a
    1-based ``rank``."""
    keys = [c for c in sort_by if c in cand.columns]
    tie = ["tie"] if "tie" in cand.columns else []
    ties = [pl.col(c).fill_null(np.iinfo(np.int64).max) for c in tie_break if c in cand.columns]
    return cand.sort(
        ["query_idx", *keys, "score", *tie, *ties, "node_idx"],
        descending=[False, *[True] * len(keys), True, *[False] * (len(tie) + len(ties)), False],
    ).with_columns(rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32))


def group_by_doc(r: pl.DataFrame, doc_idx: np.ndarray, per_doc: int) -> pl.DataFrame:
    """ReMe node-level grouping: keep each doc's best ``per_doc`` units; documents ordered by their
    best unit, units by score inside a document; ranks renumbered. ``doc_idx`` maps node → doc."""
    g = (
        r.with_columns(doc=pl.Series(doc_idx[r["node_idx"].to_numpy()]))
        .with_columns(
            in_doc=pl.col("rank").rank("ordinal").over("query_idx", "doc"),
            doc_best=pl.col("rank").min().over("query_idx", "doc"),
        )
        .filter(pl.col("in_doc") <= per_doc)
        .sort(["query_idx", "doc_best", "rank"])
    )
    return g.drop("in_doc", "doc_best", "doc").with_columns(
        rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32)
    )


def _cut(
    r: pl.DataFrame, k: int, doc_idx: np.ndarray | None, k_in_docs: bool, window: int | None
) -> pl.DataFrame:
    """The first ``k`` rows per query, or (``k_in_docs``) the rows of its first ``k`` documents,
    among its first ``window``·k rows when ``window`` is set (OKS's fts5 backend: the pages of
    the 4·limit best node rows, at most ``limit``)."""
    if not k_in_docs or doc_idx is None:
        return r.filter(pl.col("rank") <= k)
    if window:
        r = r.filter(pl.col("rank") <= window * k)
    d = pl.Series(doc_idx[r["node_idx"].to_numpy()])
    first = r.with_columns(doc=d).with_columns(
        pl.col("rank").min().over("query_idx", "doc").alias("first")
    )
    first = first.with_columns(doc_rank=pl.col("first").rank("dense").over("query_idx"))
    return first.filter(pl.col("doc_rank") <= k).drop("doc", "first", "doc_rank")


def select(
    cand: pl.DataFrame,
    k: int,
    p: SelectParams,
    xb: np.ndarray | None = None,
    device: str = "cpu",
    doc_idx: np.ndarray | None = None,
) -> pl.DataFrame:
    """Each query's recall rows: candidates ranked, grouped and spread by document, then cut to ``k`` or diversified."""
    require_one_of("select.method", p.method, METHODS)
    r = ranked(_head(cand, k, p), tuple(p.sort_by), tuple(p.tie_break))
    if p.top_chunks_per_doc:
        if doc_idx is None:
            raise ConfigError("select.top_chunks_per_doc needs a doc_id column in the nodes")
        r = group_by_doc(r, doc_idx, int(p.top_chunks_per_doc))
    if p.k_in_docs and p.method != "topk":
        raise ConfigError(
            f"select.k_in_docs counts documents for select=topk only; use select=topk or "
            f"select.k_in_docs=false with select={p.method}"
        )
    r = spread(r, doc_idx, float(p.spread_gap))
    if p.method == "topk":
        return _cut(r, k, doc_idx, p.k_in_docs, p.doc_window)
    no_gain = pl.lit(None, GAIN_DTYPE[_gain_dtype(p)]).alias("dpp_gain")
    if r.height == 0:  # the dpp_gain column all the same: a run's schema is not its queries'
        return r.with_columns(no_gain)
    if xb is None:
        raise ConfigError(
            f"select.method={p.method} needs embeddings: enable the dense channel or use select=topk"
        )
    target = int(p.target or k)
    pool = r.filter(pl.col("rank") <= p.pool_mult * target)
    # BME: diversify only a pool larger than the target; a smaller one keeps its score order
    pool = pool.filter(pl.len().over("query_idx") > target)
    if not pool.height:
        return r.filter(pl.col("rank") <= k).with_columns(no_gain)
    chosen = _diversify(pool, min(target, k), p, xb, device)
    rest = r.join(
        chosen.select("query_idx", "node_idx"), on=["query_idx", "node_idx"], how="anti"
    ).with_columns(rank=pl.col("rank") + 1_000_000)  # after the picks, in score order
    out = pl.concat([chosen, rest], how="diagonal_relaxed").sort(["query_idx", "rank"])
    return out.with_columns(
        rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32)
    ).filter(pl.col("rank") <= k)


def _head(cand: pl.DataFrame, k: int, p: SelectParams) -> pl.DataFrame:
    """The candidates that can reach the selection: each query's rows whose score reaches its
    ``depth``-th largest (:func:`_depth`), ties at the cut included (``ops.scoring.head``), so
    every row :func:`ranked` ranks within ``depth`` keeps its rank. The whole frame when the order
    is not the score's alone (:func:`_cuttable`) or a score is NaN or null."""
    if not cand.height or not _cuttable(cand.columns, p) or cand["score"].null_count():
        return cand
    keep = scoring.head(cand["query_idx"].to_numpy(), cand["score"].to_numpy(), _depth(k, p))
    return cand if keep is None or len(keep) == cand.height else cand[keep]


def _cuttable(columns: list[str], p: SelectParams) -> bool:
    """Whether a query's selection depends on its highest scores alone: no priority column
    (``sort_by``), no per-document grouping, no spreading."""
    by_docs = p.k_in_docs and not p.doc_window  # k documents: no row depth bounds them
    return not (
        any(c in columns for c in p.sort_by) or p.top_chunks_per_doc or p.spread_gap or by_docs
    )


def _depth(k: int, p: SelectParams) -> int:
    """How many of a query's best rows the selection can reach: ``k``, or the dpp/mmr pool."""
    if p.method == "topk":
        return max(1, k * (p.doc_window or 1))
    return max(1, k, p.pool_mult * int(p.target or k))


def scored_rows(cand: pl.DataFrame, scored, k: int, p: SelectParams) -> pl.DataFrame:
    """``cand`` (scored on a device: ``stages.score.Scored``, no ``score`` column yet) with the
    score of the rows that can reach the selection: the head is cut on the device
    (``ops.scoring.head``) and only its rows' indices and scores come back; every row when the
    head cannot be cut (:func:`_head`'s conditions)."""
    keep = None
    if (
        cand.height
        and _cuttable(cand.columns, p)
        and (scored.valid is None or bool(scored.valid.all()))
    ):
        xp, _ = backend.namespaces(scored.score)
        query = xp.asarray(cand["query_idx"].to_numpy())
        keep = scoring.head(query, scored.score, _depth(k, p))
    if keep is None:
        return cand.with_columns(scored.column())
    return cand[backend.to_host(keep)].with_columns(scored.column(keep))


def _gain_dtype(p: SelectParams) -> str:
    """The ``dpp_gain`` column's dtype: the kernel's for DPP, float64 (all NaN) for MMR."""
    return p.dtype if p.method == "dpp" else "float64"


def _diversify(
    pool: pl.DataFrame, k: int, p: SelectParams, xb: np.ndarray, device: str
) -> pl.DataFrame:
    """DPP or MMR picks (greedy order, ``rank`` 1..k, ``dpp_gain``) from each query's pool."""
    import torch

    from pipeline.ops.dpp import MIN_ROWS, dpp_greedy, mmr_greedy, pool_width

    pool = pool.with_columns(rank=pl.col("node_idx").cum_count().over("query_idx").cast(pl.Int32))
    qids = pool["query_idx"].unique(maintain_order=True).to_numpy()
    row = np.searchsorted(qids, pool["query_idx"].to_numpy())
    col = pool["rank"].to_numpy() - 1
    # each query padded to the width of its own pool (which fixes its Gram/lazy path), and batched
    # only with queries of that width: its picks and gain bits depend on its own pool alone
    widths = np.array([pool_width(int(n)) for n in np.bincount(row, minlength=len(qids))])
    node = np.full((len(qids), int(widths.max())), -1, np.int64)
    score = np.zeros(node.shape, np.float64)
    node[row, col] = pool["node_idx"].to_numpy()
    score[row, col] = pool["quality" if "quality" in pool.columns else "score"].to_numpy()
    sel = np.full((len(qids), k), -1, np.int64)
    gain = np.full((len(qids), k), np.nan, _gain_dtype(p))
    dtype = getattr(torch, p.dtype)
    for w in np.unique(widths):
        members = np.flatnonzero(widths == w)
        for s in range(0, len(members), p.batch):
            idx = members[s : s + p.batch]
            rows = np.concatenate([idx, np.full(max(0, MIN_ROWS - len(idx)), -1)])
            nd = np.where(rows[:, None] >= 0, node[rows, :w], -1)  # padding rows: nothing valid
            valid = torch.as_tensor(nd >= 0, device=device)
            emb = _rows(xb, np.maximum(nd, 0), device)
            q = torch.as_tensor(np.where(nd >= 0, score[rows, :w], 0.0), device=device)
            if p.method == "dpp":
                got, g = dpp_greedy(q, emb, k, valid, quality_weight=p.quality_weight, dtype=dtype)
                gain[idx] = g[: len(idx)].cpu().numpy()
            else:
                got = mmr_greedy(q, emb, k, p.lam, valid, dtype=dtype)
            sel[idx] = got[: len(idx)].cpu().numpy()
    qi, step = np.nonzero(sel >= 0)
    chosen = pl.DataFrame(
        {
            "query_idx": qids[qi],
            "node_idx": node[qi, sel[qi, step]],
            "rank": (step + 1).astype(np.int32),
            "dpp_gain": gain[qi, step],
        }
    )
    return chosen.join(pool.drop("rank"), on=["query_idx", "node_idx"], how="left").sort(
        ["query_idx", "rank"]
    )


def _rows(xb, idx: np.ndarray, device: str):
    """The vectors of ``xb`` at ``idx`` (any shape) as a tensor on ``device``: gathered on the
    host from an array, or where a resident tensor (``dense.resident``) lives, only the indices
    sent over; a gather, so the same values either way."""
    import torch

    from pipeline.channels.dense_torch import take_rows

    return torch.as_tensor(take_rows(xb, idx), device=device)


def recall_rows(
    sel: pl.DataFrame,
    ds_nodes: pl.DataFrame,
    queries: pl.DataFrame,
    enabled: list[str],
    extra: list[str] = (),
    group_docs: bool = False,
) -> pl.DataFrame:
    """The selected rows as the recall table: ids for indices, the channels that found each node,
    the score columns, and (ReMe node-level surface) the document's title and summary."""
    found = [pl.when(pl.col(f"{c}_rank").is_not_null()).then(pl.lit(c)) for c in enabled]
    for comp in ("residual", "graph"):
        if comp in sel.columns:
            found.append(pl.when(pl.col(comp) > 0).then(pl.lit(comp)))
    if "probabilistic" in sel.columns:
        found.append(pl.when(pl.col("probabilistic")).then(pl.lit("probabilistic")))
    if "oks_channel" in sel.columns:  # stages.oks_backend: "native" for OKS's native hits
        found.append(pl.col("oks_channel"))
    ids = lambda col, idx: col.cast(pl.String).gather(sel[idx])  # noqa: E731
    out = sel.with_columns(
        query_id=ids(queries["query_id"], "query_idx"),
        node_id=ids(ds_nodes["node_id"], "node_idx"),
        channel=pl.concat_str(found, separator="+", ignore_nulls=True),
    )
    cols = [
        "query_id",
        "rank",
        "node_id",
        "score",
        "channel",
        *enabled,
        "fused",
        *[c for c in ("residual", "graph") if c in sel.columns],
        *extra,
        *(["dpp_gain"] if "dpp_gain" in sel.columns else []),
    ]
    if "doc_id" in ds_nodes.columns:
        out = out.with_columns(doc_id=ids(ds_nodes["doc_id"], "node_idx"))
        cols.insert(3, "doc_id")
        if group_docs:  # ReMe node-level surface: the document's front-matter name and description
            for src, dst in (("title", "doc_title"), ("description", "doc_summary")):
                if src in ds_nodes.columns:
                    # gather, not numpy: a column with nulls is an object array, and an empty one cannot be cast
                    out = out.with_columns(
                        ds_nodes[src].cast(pl.String).gather(sel["node_idx"]).alias(dst)
                    )
                    cols.insert(cols.index("doc_id") + 1, dst)
    return out.select(cols)


def with_node_text(recall: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """``recall`` with its nodes' ``title`` (null where the nodes have none) and ``text`` as the
    last columns, rows and every other column unchanged: what was recalled, readable without a
    join (``recall.parquet`` and the recall cache)."""
    title = pl.col("title").cast(pl.String) if "title" in nodes.columns else pl.lit(None, pl.String)
    info = nodes.select("node_id", title.alias("title"), pl.col("text").cast(pl.String))
    base = recall.drop([c for c in ("title", "text") if c in recall.columns])
    return base.join(info, on="node_id", how="left", maintain_order="left")


def run_stage(ctx, p: SelectParams) -> object:
    """Select each query's ``k`` (with the scope policy's priority columns), append probabilistic
    recall, and turn the rows into the recall table."""
    from pipeline.stages import probrecall

    nodes = ctx.scored_nodes if ctx.scored_nodes is not None else ctx.nodes
    doc_idx = (
        nodes["doc_id"].fill_null(nodes["node_id"]).rank("dense").to_numpy()
        if "doc_id" in nodes.columns
        else None
    )
    cand, p = ctx.cand, dataclasses.replace(p, sort_by=tuple(ctx.policy.sort_by))
    if "score" not in cand.columns:  # scored on a device: its head comes back
        cand = scored_rows(cand, ctx.scored, p.k, p)
    if ctx.policy.factors and cand.height:  # BME's DPP quality is finalScore: before scope weights
        cand = cand.with_columns(
            quality=pl.col("score")
            / pl.reduce(lambda a, b: a * b, [pl.col(f) for f in ctx.policy.factors])
        )
    sel = select(
        cand,
        p.k,
        p,
        dense.resident(ctx, p.dense_index),
        ctx.run.device,
        doc_idx,
    )
    prob = p.prob_recall
    if prob is not None:
        sel = probrecall.append(
            sel,
            nodes,
            ctx.queries,
            p.k,
            p=prob.p,
            min_importance=prob.min_importance,
            seed=p.seed,
            include_archived=p.include_archived,
        )
    extra = list(p.columns) + ctx.policy.factors + ctx.policy.sort_by
    extra += ["cooccur"] if "cooccur" in sel.columns else []
    ctx.recall = recall_rows(
        sel, nodes, ctx.queries, list(p.channels), extra, bool(p.top_chunks_per_doc)
    )
    return ctx


STAGE = Stage("select", run_stage, params=SelectParams.of)
