"""Graph construction: explicit edges plus derived temporal-chain, title-mention and kNN edges.

Output is an index-based edge frame (``src``, ``dst`` node indices, ``weight``, ``inhibit``,
``relation``, optional ``valid_from``/``valid_to``), and ``adjacency`` turns it into the symmetric
sparse matrices diffusion uses (BME: every edge counts in both directions, parallel edges add).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.core.stage import Params, Stage
from pipeline.ops.titles import TitleFinder

EDGE_SCHEMA = {
    "src": pl.Int64,
    "dst": pl.Int64,
    "weight": pl.Float32,
    "inhibit": pl.Boolean,
    "relation": pl.String,
}


@dataclass(frozen=True)
class GraphParams(Params):
    """Graph settings: explicit, temporal, mention and kNN edges and their weights."""

    GROUP: ClassVar[str] = "graph"
    OPTION: ClassVar[str] = "default"  # what Params.defaults() loads
    relation_weights: dict  # multiplier per explicit relation (default 1)
    default_weight: float  # weight of an explicit edge given without one (BME createEdge: 0.8)
    temporal: bool
    temporal_weight: float  # BME temporalLinkStrength
    temporal_key: str  # consecutive `seq` within the same value of this column
    temporal_same_type: bool  # BME links only nodes of the same type
    mentions: bool
    mention_weight: float
    mention_min_len: int
    mention_case_sensitive: bool
    knn_k: int
    knn_threshold: float
    knn_weight: float
    hubs: dict  # virtual hub layers (pipeline.stages.hubs.HubParams)
    # the run's, filled by :meth:`of`: the hub layer's parameters when diffusion runs (None: no
    # hubs are built), whether hubs may embed (the dense channel is on), where their cache lives
    hub_params: Any = field(default=None, metadata={"runtime": True})
    embed: bool = field(default=False, metadata={"runtime": True})
    cache_dir: str = field(default="", metadata={"runtime": True})

    @classmethod
    def of(cls, run) -> GraphParams:
        """The ``graph`` group with the run's hub settings (``graph.hubs``, read when
        ``diffuse.method`` is not ``none``), dense channel and ``cache_dir``."""
        from pipeline.stages import hubs

        cfg = run.cfg
        p = cls.from_cfg(cfg.graph, "graph")
        diffuses = cfg.diffuse.method != "none"
        return dataclasses.replace(
            p,
            hub_params=hubs.HubParams.from_cfg(p.hubs, "graph.hubs") if diffuses else None,
            embed="dense" in cfg.channels,
            cache_dir=str(cfg.cache_dir),
        )


def explicit_edges(
    edges: pl.DataFrame | None,
    node_ids: pl.Series,
    rel_w: dict,
    skipped: Counter,
    default_w: float = 1.0,
) -> pl.DataFrame:
    """The dataset's edges by node index, weighted per relation; dangling ones and self-loops dropped and counted."""
    if edges is None or edges.height == 0:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    idx = pl.DataFrame(
        {"node_id": node_ids, "i": pl.Series(np.arange(len(node_ids)), dtype=pl.Int64)}
    )
    e = edges.join(idx.rename({"node_id": "src", "i": "s"}), on="src", how="left").join(
        idx.rename({"node_id": "dst", "i": "d"}), on="dst", how="left"
    )
    dangling = e["s"].is_null() | e["d"].is_null()
    skipped["edge_dangling"] += int(dangling.sum())
    e = e.filter(~dangling)
    self_loop = e["s"] == e["d"]
    skipped["edge_self_loop"] += int(self_loop.sum())
    e = e.filter(~self_loop)
    rel = (
        e["relation"] if "relation" in e.columns else pl.Series([None] * e.height, dtype=pl.String)
    )
    w = (
        e["weight"].fill_null(default_w)
        if "weight" in e.columns
        else pl.Series(np.full(e.height, default_w, np.float32))
    )
    mult = (
        rel.fill_null("").replace_strict(rel_w, default=1.0, return_dtype=pl.Float32)
        if rel_w
        else 1.0
    )
    out = pl.DataFrame(
        {
            "src": e["s"],
            "dst": e["d"],
            "weight": (w * mult).cast(pl.Float32),
            "inhibit": e["inhibit"].fill_null(False) if "inhibit" in e.columns else False,
            "relation": rel.fill_null("edge"),
        }
    ).cast(EDGE_SCHEMA)
    for col in ("valid_from", "valid_to"):
        if col in e.columns:
            out = out.with_columns(e[col])
    return out


def temporal_edges(
    nodes: pl.DataFrame, p: GraphParams, seg: np.ndarray | None = None
) -> pl.DataFrame:
    """Consecutive nodes (by seq) sharing ``temporal_key`` (and type, if asked) get one edge;
    with ``seg`` (each node's segment), only within a segment."""
    if not p.temporal or "seq" not in nodes.columns or p.temporal_key not in nodes.columns:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    keys = [p.temporal_key] + (["type"] if p.temporal_same_type and "type" in nodes.columns else [])
    if seg is not None:
        nodes, keys = nodes.with_columns(_seg=pl.Series(seg, dtype=pl.Int64)), ["_seg", *keys]
    t = (
        nodes.with_row_index("i")
        .filter(pl.col("seq").is_not_null() & pl.col(p.temporal_key).is_not_null())
        .sort([*keys, "seq", "i"])
        .with_columns(prev=pl.col("i").shift(1).over(keys))
        .filter(pl.col("prev").is_not_null())
    )
    return pl.DataFrame(
        {
            "src": t["prev"],
            "dst": t["i"],
            "weight": p.temporal_weight,
            "inhibit": False,
            "relation": "temporal",
        }
    ).cast(EDGE_SCHEMA)


def mention_edges(nodes: pl.DataFrame, p: GraphParams) -> pl.DataFrame:
    """Node A → node B when A's text mentions B's title as a whole word (Aho–Corasick, one pass)."""
    if not p.mentions or "title" not in nodes.columns:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    finder = TitleFinder(
        nodes["title"].to_list(), p.mention_min_len, str if p.mention_case_sensitive else str.lower
    )
    if not finder:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    src, dst = [], []
    for i, text in enumerate(nodes["text"].to_list()):
        for t in finder.find(text, whole_word=True):
            for j in finder.nodes[t]:
                if j != i:
                    src.append(i)
                    dst.append(j)
    return pl.DataFrame(
        {
            "src": src,
            "dst": dst,
            "weight": p.mention_weight,
            "inhibit": False,
            "relation": "mention",
        },
        schema_overrides={"src": pl.Int64, "dst": pl.Int64},
    ).cast(EDGE_SCHEMA)


def knn_edges(xb: np.ndarray | None, p: GraphParams) -> pl.DataFrame:
    """Each node → its k most similar nodes with cosine ≥ threshold (FAISS flat search)."""
    if p.knn_k <= 0 or xb is None or len(xb) < 2:
        return pl.DataFrame(schema=EDGE_SCHEMA)
    from pipeline.channels import dense

    D, I = dense.search(dense.build_index(xb), xb, p.knn_k + 1)
    src = np.repeat(np.arange(len(xb)), I.shape[1])
    keep = (I.ravel() >= 0) & (I.ravel() != src) & (D.ravel() >= p.knn_threshold)
    return pl.DataFrame(
        {
            "src": src[keep],
            "dst": I.ravel()[keep],
            "weight": p.knn_weight,
            "inhibit": False,
            "relation": "knn",
        }
    ).cast(EDGE_SCHEMA)


def build(
    nodes: pl.DataFrame,
    edges: pl.DataFrame | None,
    p: GraphParams,
    xb: np.ndarray | None = None,
    skipped: Counter | None = None,
    seg: np.ndarray | None = None,
) -> pl.DataFrame:
    """All edges of the graph: explicit, temporal, mention and kNN, one frame in EDGE_SCHEMA.
    With ``seg`` (each node's segment: scope groups laid end to end, ``querypath``) no edge joins
    two segments, so each segment's graph is the one it would have alone; mention and kNN edges
    are searched over the whole table, so segments refuse them (``packs.packable`` keeps such
    configs group by group)."""
    skipped = Counter() if skipped is None else skipped
    if seg is not None and (p.mentions or p.knn_k > 0):
        raise ValueError("mention and kNN edges are found over the whole table, not per segment")
    stored = explicit_edges(edges, nodes["node_id"], p.relation_weights, skipped, p.default_weight)
    # a store that keeps its own chain (ST-BME prevId/nextId → "temporal" edges) replaces the derived one
    own_chain = bool((stored["relation"] == "temporal").any())
    out = pl.concat(
        [
            stored,
            pl.DataFrame(schema=EDGE_SCHEMA) if own_chain else temporal_edges(nodes, p, seg),
            mention_edges(nodes, p),
            knn_edges(xb, p),
        ],
        how="diagonal_relaxed",
    )
    if seg is None:
        return out
    return out.filter(seg[out["src"].to_numpy()] == seg[out["dst"].to_numpy()])


def in_window(edges: pl.DataFrame, now) -> pl.DataFrame:
    """The edges whose validity window contains ``now`` (``valid_from`` ≤ now < ``valid_to``; a null
    bound is open); every edge when ``now`` is None. Every stage that walks edges goes through it."""
    if now is None:
        return edges
    e = edges
    if "valid_from" in e.columns:
        e = e.filter(pl.col("valid_from").is_null() | (pl.col("valid_from") <= now))
    if "valid_to" in e.columns:
        e = e.filter(pl.col("valid_to").is_null() | (pl.col("valid_to") > now))
    return e


def adjacency(
    edges: pl.DataFrame, n: int, rows: np.ndarray | None = None, now=None
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Symmetric (normal, inhibitory) CSR matrices over ``rows`` (all nodes when None).

    An edge with a validity window that does not contain ``now`` is left out (``in_window``).
    """
    e = in_window(edges, now)
    src, dst = e["src"].to_numpy(), e["dst"].to_numpy()
    w, inh = e["weight"].to_numpy().astype(np.float32), e["inhibit"].to_numpy()
    size = n
    if rows is not None:
        local = np.full(n, -1, np.int64)
        local[rows] = np.arange(len(rows))
        src, dst = local[src], local[dst]
        keep = (src >= 0) & (dst >= 0)
        src, dst, w, inh = src[keep], dst[keep], w[keep], inh[keep]
        size = len(rows)

    def sym(mask):
        s, d, ww = src[mask], dst[mask], w[mask]
        m = sp.coo_matrix((np.r_[ww, ww], (np.r_[s, d], np.r_[d, s])), shape=(size, size)).tocsr()
        m.sum_duplicates()
        return m

    return sym(~inh), sym(inh)


def directed_topn(
    edges: pl.DataFrame, n: int, rows: np.ndarray | None = None, per_node: int = 10, now=None
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(out, in) 0/1 matrices: row j holds j's first ``per_node`` out-/in-neighbours (by weight desc,
    then node index), normal edges only, live at ``now`` (``in_window``); restricted to ``rows`` when given."""
    e = in_window(edges, now).filter(~pl.col("inhibit"))
    size = n
    src, dst, w = e["src"].to_numpy(), e["dst"].to_numpy(), e["weight"].to_numpy()
    if rows is not None:
        local = np.full(n, -1, np.int64)
        local[rows] = np.arange(len(rows))
        src, dst = local[src], local[dst]
        ok = (src >= 0) & (dst >= 0)
        src, dst, w = src[ok], dst[ok], w[ok]
        size = len(rows)

    def cut(a, b):
        f = (
            pl.DataFrame({"a": a, "b": b, "w": w})
            .unique(["a", "b"], keep="first")
            .sort(["a", "w", "b"], descending=[False, True, False])
            .group_by("a", maintain_order=True)
            .head(per_node)
        )
        return sp.csr_matrix(
            (np.ones(f.height, np.float32), (f["a"].to_numpy(), f["b"].to_numpy())),
            shape=(size, size),
        )

    return cut(src, dst), cut(dst, src)


def run_stage(ctx, p: GraphParams) -> object:
    """The group's weighted edges (explicit among its nodes, temporal, mentions, kNN) and, when
    diffusion runs, its entity hubs; both memoised per node table."""
    from pipeline.core.memo import corpus_step
    from pipeline.encoders.models import embed_cached
    from pipeline.stages import hubs

    state = ctx.run
    explicit = (
        state.ds.edges if ctx.edges is None else ctx.edges
    )  # dangling/self-loop edges: counted once per run
    tag = ctx.segment_tag()  # a memo entry per segmentation of the node table
    ctx.graph = corpus_step(
        state.memo,
        f"graph{tag}",
        ctx.nodes,
        lambda: build(ctx.nodes, explicit, p, ctx.xb, Counter(), ctx.seg),
    )
    if p.hub_params is not None:
        embed = (
            (lambda t: embed_cached(state.encoder, t, state.cache, state.device)[0])
            if p.embed
            else None
        )
        hub_p = p.hub_params
        ctx.hub_params = hub_p
        ctx.hub_graph = corpus_step(
            state.memo,
            f"hubs{tag}",
            ctx.nodes,
            lambda: hubs.build(ctx.nodes, hub_p, embed, ctx.seg, Path(p.cache_dir) / "entities"),
        )
    state.log.most("graph_edges", _largest(ctx.seg, ctx.graph["src"].to_numpy()))
    hub_seg = None if ctx.hub_graph is None else _hub_segments(ctx.hub_graph, ctx.seg)
    state.log.most("hubs", 0 if hub_seg is None else _largest(ctx.seg, hub_seg))
    return ctx


def _largest(seg: np.ndarray | None, of: np.ndarray) -> int:
    """The largest group's count of items whose segment (or node, mapped by ``seg``) is ``of``:
    the whole count for one group, so the manifest's per-group maxima do not depend on packing."""
    if seg is None or len(of) == 0:
        return len(of)
    return int(np.bincount(seg[of]).max())


def _hub_segments(hub_graph, seg: np.ndarray | None) -> np.ndarray:
    """A node of each hub's segment (its first unit), for :func:`_largest`."""
    inc = hub_graph.inc.tocsc()
    return inc.indices[inc.indptr[:-1]] if seg is not None else np.zeros(hub_graph.size, np.int64)


STAGE = Stage(
    "graph",
    run_stage,
    enabled=lambda cfg: cfg.diffuse.method != "none" or bool(cfg.signals.enabled),
    params=GraphParams.of,
)
