"""The ``oks_backend`` stage: OKS's ``native`` and ``fusion`` search backends, after ``fuse``.

``oks_backend.search_backend``: ``none`` (the stage is off: the channels' ranking), ``settings``
(``preset=oks``: the instance's ``settings/recall.yaml`` ``search_backend``, OKS's code default
``native`` when the file or the key is missing; a dataset that is not an OKS instance keeps the
preset's fts5 ranking), or ``fts5`` | ``native`` | ``fusion`` to override it. ``legacy`` is OKS's
other name of ``native``; a backend OKS loads from a connector is not reproduced (fts5's ranking,
with a ``fallbacks`` line: ``adapters.oks_settings.backend_note``).

- ``fts5``: nothing changes (the lexical channel is OKS's fts5 backend).
- ``native``: the candidates become each query's native hits, one row per page (its first node
  row): ``fused`` = OKS's relevance, ties by slug (``stages.oks_native``).
- ``fusion`` (``search/fusion.py``): fts5's first ``2k`` pages (of its first ``8k`` node rows, the
  best row each, as ``FTS5Backend.search(limit=2k)``), each scored ``0.7·fts5/max + 0.3·native/max``
  with native's own top ``2k`` (relevance rounded to 3 places, as OKS hands it over; 0 for a page
  not among them); ties keep fts5's order. A query fts5 finds nothing for gets native's top ``k``
  (rounded). The native part takes the goals the query names, as OKS's ``NativeBackend`` (which
  always sees the active goals unless one is named).

The goal reorder OKS applies after a backend (goal slugs first) stays an injection step
(``inject.goal_reorder``), as for fts5. Rows carry ``tie`` (ascending), which ``select`` reads
after the score; native's rows carry ``oks_channel`` = ``native`` (``fusion_native`` for fusion's
fallback to native), their recall ``channel``, which the OKS hook text reads: such a hit is shown
with its page title, and a ``native`` one is not goal-reordered, as OKS's hook shows them
(``recall.py``: the native path returns before the reorder; fusion's does not).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.adapters import oks_settings
from pipeline.contract.errors import require_int, require_one_of
from pipeline.core.stage import Params, Stage
from pipeline.ops import oks_native as ops
from pipeline.stages import oks_native

CHOICES = ("none", "settings", "fts5", "native", "fusion")
NATIVE, FUSION_NATIVE = "native", "fusion_native"  # recall channels: native's hits; fusion's
# fallback to native's list when fts5 finds nothing
NO_FTS5 = {  # fusion without a lexical channel: fts5 found nothing
    "query_idx": pl.Int64,
    "node_idx": pl.Int64,
    "lexical": pl.Float32,
    "lexical_rank": pl.Int32,
    "fts5_pos": pl.Int64,
    "_doc": pl.UInt32,
}


@dataclass(frozen=True)
class OksBackendParams(Params):
    """Which OKS search backend ranks: ``none`` (off), ``settings`` (the instance's), or one."""

    GROUP: ClassVar[str] = "oks_backend"
    search_backend: str
    k: int = field(default=10, metadata={"runtime": True})  # the run's k (each page: 2·k hits)

    def __post_init__(self) -> None:
        require_one_of("oks_backend.search_backend", self.search_backend, CHOICES)


def resolve(choice: str, settings: dict | None) -> str:
    """The backend a run ranks with: ``choice``, or for ``settings`` the instance's own (OKS's
    code default ``native`` without one), ``fts5`` for a dataset with no OKS settings or a backend
    that is not reproduced."""
    if choice != "settings":
        return choice
    if not settings:
        return "fts5"
    backend = str(settings.get("search_backend", "native")).lower()
    if backend not in oks_settings.REPRODUCED:
        return "fts5"
    return "native" if backend == "legacy" else backend


def _nows(ctx) -> list:
    if "now" in ctx.queries.columns:
        return [n or ctx.now for n in ctx.queries["now"].to_list()]
    return [ctx.now] * ctx.queries.height


def fts5_pages(cand: pl.DataFrame, doc: np.ndarray, limit: int) -> pl.DataFrame:
    """``FTS5Backend.search(limit)`` from the lexical candidates: each query's first ``4·limit``
    rows (score, then node order), the best row of each page, the first ``limit`` pages, as
    (query_idx, node_idx, lexical, lexical_rank, fts5_pos)."""
    rows = (
        cand.filter(pl.col("lexical").is_not_null())
        .sort(["query_idx", "lexical", "node_idx"], descending=[False, True, False])
        .filter(pl.int_range(pl.len()).over("query_idx") < 4 * limit)
    )
    rows = rows.with_columns(_doc=pl.Series(doc[rows["node_idx"].to_numpy()]))
    best = rows.unique(["query_idx", "_doc"], keep="first", maintain_order=True)
    best = best.with_columns(fts5_pos=pl.int_range(pl.len()).over("query_idx"))
    return best.filter(pl.col("fts5_pos") < limit).select(
        "query_idx", "node_idx", "lexical", "lexical_rank", "fts5_pos", "_doc"
    )


def fusion(fts: pl.DataFrame, native: pl.DataFrame, k: int) -> pl.DataFrame:
    """``FusionBackend.search`` for every query: ``fts`` (:func:`fts5_pages` at ``2k``) and
    ``native`` (query_idx, _doc, node_idx, relevance: native's top ``2k``) → (query_idx,
    node_idx, lexical, lexical_rank, fused, tie), ``k`` rows a query."""
    nat = native.with_columns(n=pl.Series(ops.round3(native["relevance"].to_numpy())))
    n_max = nat.group_by("query_idx").agg(n_max=pl.col("n").max())
    x = (
        fts.join(nat.select("query_idx", "_doc", "n"), on=["query_idx", "_doc"], how="left")
        .join(n_max, on="query_idx", how="left")
        .with_columns(f_max=pl.col("lexical").cast(pl.Float64).max().over("query_idx"))
    )
    fused = ops.fusion_scores(
        x["lexical"].cast(pl.Float64).to_numpy(),
        x["f_max"].to_numpy(),
        x["n"].fill_null(0.0).to_numpy(),
        x["n_max"].fill_null(0.0).to_numpy(),
    )
    x = x.with_columns(fused=pl.Series(fused), tie=pl.col("fts5_pos"))
    x = x.sort(["query_idx", "fused", "tie"], descending=[False, True, False])
    x = x.filter(pl.int_range(pl.len()).over("query_idx") < k)
    alone = nat.join(fts.select("query_idx").unique(), on="query_idx", how="anti")
    alone = alone.filter(pl.int_range(pl.len()).over("query_idx") < k).with_columns(
        fused=pl.col("n"),
        tie=pl.int_range(pl.len()).over("query_idx"),
        lexical=pl.lit(None, pl.Float32),
        lexical_rank=pl.lit(None, pl.Int32),
        oks_channel=pl.lit(FUSION_NATIVE),
    )
    cols = ["query_idx", "node_idx", "lexical", "lexical_rank", "fused", "tie"]
    return pl.concat(
        [x.select(cols), alone.select(*cols, "oks_channel")], how="diagonal_relaxed"
    ).sort("query_idx", "tie", maintain_order=True)


def _native_part(ctx, nodes_at: np.ndarray, queries_at: np.ndarray, depth: int) -> pl.DataFrame:
    """Native hits of the queries ``queries_at`` over the nodes ``nodes_at`` (one group, or one
    segment of a pack) as (query_idx, node_idx, _doc, relevance, slug_rank), context numbering."""
    goals = (ctx.run.ds.tables or {}).get("goals") if ctx.run.ds is not None else None
    nows = _nows(ctx)
    pages, hits = oks_native.native_hits(
        ctx.nodes[nodes_at],
        ctx.queries[queries_at],
        goals,
        [nows[int(q)] for q in queries_at],
        depth,
        ctx.run.device,
    )
    pages = pages.with_columns(
        node_idx=pl.Series(nodes_at[pages["node_idx"].to_numpy()].astype(np.int64)),
        slug_rank=pl.col("slug").rank("dense").cast(pl.Int64),
    ).with_row_index("page")
    return (
        hits.with_columns(
            query_idx=pl.Series(queries_at[hits["query"].to_numpy()].astype(np.int64)),
            page=pl.col("page").cast(pl.UInt32),
        )
        .join(pages.select("page", "node_idx", "slug_rank"), on="page", how="left")
        .select("query_idx", "node_idx", "relevance", "slug_rank")
    )


def _parts(ctx) -> list[tuple[np.ndarray, np.ndarray]]:
    """(node rows, query rows) of each group in the context (a pack's segments, else one)."""
    if ctx.segments is None:
        return [(np.arange(ctx.nodes.height), np.arange(ctx.queries.height))]
    return [(np.asarray(r), np.asarray(q)) for _k, r, q in ctx.segments if len(q)]


def run_stage(ctx, p: OksBackendParams) -> object:
    """Re-rank the group's candidates with the resolved OKS backend (module docstring)."""
    backend = resolve(p.search_backend, ctx.run.ds.settings if ctx.run.ds is not None else None)
    if backend == "fts5" or ctx.queries.height == 0 or ctx.nodes.height == 0:
        return ctx
    k = p.k
    native = pl.concat(
        [_native_part(ctx, n, q, 2 * k) for n, q in _parts(ctx)], how="diagonal_relaxed"
    )
    nodes = ctx.nodes
    doc = (
        nodes["doc_id"].fill_null(nodes["node_id"])
        if "doc_id" in nodes.columns
        else nodes["node_id"]
    )
    doc = doc.rank("dense").to_numpy()
    native = native.with_columns(_doc=pl.Series(doc[native["node_idx"].to_numpy()]))
    if backend == "native":
        out = native.select(
            "query_idx", "node_idx", fused=pl.col("relevance"), tie=pl.col("slug_rank")
        ).with_columns(
            lexical=pl.lit(None, pl.Float32),
            lexical_rank=pl.lit(None, pl.Int32),
            oks_channel=pl.lit(NATIVE),
        )
    else:
        cand = ctx.cand if ctx.cand is not None and "lexical" in ctx.cand.columns else None
        fts = fts5_pages(cand, doc, 2 * k) if cand is not None else pl.DataFrame(schema=NO_FTS5)
        out = fusion(fts, native, k)
    ctx.cand = out.with_columns(
        pl.col("query_idx").cast(ctx.cand["query_idx"].dtype if ctx.cand is not None else pl.Int64),
        pl.col("node_idx").cast(ctx.cand["node_idx"].dtype if ctx.cand is not None else pl.Int64),
    ).sort("query_idx", "tie", maintain_order=True)
    ctx.run.log.add("oks_backend_rows", ctx.cand.height)
    return ctx


STAGE = Stage(
    "oks_backend",
    run_stage,
    params=lambda run: OksBackendParams.from_cfg(
        run.cfg.oks_backend, "oks_backend", k=require_int("k", run.cfg.k, 1)
    ),
    enabled=lambda cfg: cfg.oks_backend.search_backend != "none",
)
