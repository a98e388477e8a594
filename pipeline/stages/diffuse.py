"""Diffusion stage: seeds from the fused candidates, PEDSA or PPR over each scope's subgraph,
batched over the scope's queries (blocks of queries so that N·B stays bounded)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.contract.errors import require_one_of
from pipeline.core import backend
from pipeline.core.backend import namespaces
from pipeline.core.progress import inner, progress
from pipeline.core.stage import Params, Stage
from pipeline.ops.expand import expand
from pipeline.ops.pedsa import pedsa
from pipeline.ops.ppr import ppr_top
from pipeline.ops.ppr_push import ppr_push_top
from pipeline.ops.scope import scope_groups
from pipeline.ops.sparse_entries import segment_ids
from pipeline.ops.speakers import named_for
from pipeline.ops.topk import int_order, topk_abs_mask, topk_entry_mask
from pipeline.stages import hubs as hub_layer
from pipeline.stages.graph import adjacency, directed_topn

METHODS = ("pedsa", "ppr", "expand", "none")
# PPR solvers: power iteration on the seeds' components (the reference), or forward push
SOLVERS = {
    "exact": lambda adj, pers, rows, p: ppr_top(
        adj, pers, rows, p.keep, damping=p.damping, max_iter=p.max_iter
    ),
    "push": lambda adj, pers, rows, p: ppr_push_top(
        adj, pers, rows, p.keep, damping=p.damping, eps=p.push_eps, max_iter=p.max_iter
    ),
}


@dataclass(frozen=True)
class DiffusionParams(Params):
    """Graph diffusion settings: method, seeds and the walk's constants."""

    GROUP: ClassVar[str] = "diffuse"
    OPTION: ClassVar[str] = "pedsa"  # what Params.defaults() loads
    method: str
    seed_k: int  # top fused candidates per query that seed the diffusion
    seed_from: str  # candidate column giving seed energy
    seed_power: float  # seed energy = seed_from ** seed_power (> 1 sharpens towards the top seeds)
    steps: int
    decay: float
    alpha: float
    inhibit_mult: float
    clamp: float
    min_energy: float
    top_k: int
    seeds_in_result: bool  # BME: a seed's graph score is at least its seed energy
    damping: float  # ppr
    max_iter: int  # ppr (push: rounds)
    solver: str  # ppr: exact (power iteration on the seeds' components) | push (forward push)
    push_eps: float  # ppr, solver=push: a residual below push_eps × weighted degree is not pushed
    block: int  # max nodes × queries per block
    depth: int  # expand: BFS hops (ReMe default 1, at most 3)
    per_node: int  # expand: neighbours per direction per node
    budget: int  # expand: nodes added per query
    keep: int  # graph hits kept per query (its `keep` largest; 0 = every node with energy > 0)
    entity_seed_share: float  # part of the seed energy given to the query's own entity hubs
    speaker_seed_boost: float  # seed_from × (1 + this) for units whose speaker the query names
    residual_seeds: bool  # novelty's residual hits seed the diffusion too (BME)
    include_archived: bool = field(default=False, metadata={"runtime": True})  # the run's rule
    anchors: Any = field(default=None, metadata={"runtime": True})  # anchors.AnchorParams
    cross_recall: Any = field(default=None, metadata={"runtime": True})  # anchors.CrossRecallParams


def _to_device(device: str, *arrays) -> list:
    """``arrays`` (scipy.sparse or numpy) on ``device`` (``backend.to_device``)."""
    return backend.to_device(device, "graph diffusion on cpu (scipy.sparse)", *arrays)


def seed_matrix(cand: pl.DataFrame, p: DiffusionParams) -> pl.DataFrame:
    """Each query's top ``seed_k`` candidates by ``seed_from`` (positive energies only)."""
    return (
        cand.filter(pl.col(p.seed_from) > 0)
        .sort(["query_idx", p.seed_from, "node_idx"], descending=[False, True, False])
        .group_by("query_idx", maintain_order=True)
        .head(p.seed_k)
        .select(
            "query_idx", "node_idx", energy=(pl.col(p.seed_from) ** p.seed_power).cast(pl.Float32)
        )
    )


def _solve(a, i, e, p: DiffusionParams):
    """One block's PEDSA or expand diffusion on the device of its inputs (the energies stay there);
    PPR runs from sparse seeds (:func:`_ppr_hits`)."""
    if p.method == "pedsa":
        out = pedsa(
            a,
            i,
            e,
            steps=p.steps,
            decay=p.decay,
            alpha=p.alpha,
            inhibit_mult=p.inhibit_mult,
            clamp=p.clamp,
            min_energy=p.min_energy,
            top_k=p.top_k,
            seeds_in_result=p.seeds_in_result,
        )
    else:
        out = expand(a, i, e, depth=p.depth, decay=p.decay, budget=p.budget)
    return out


def _hits(out, keep: int):
    """(row, column, energy) of the positive entries of a solved (rows, B) block, each column cut to
    its ``keep`` largest first (0: all), computed where ``out`` lives; only the hits reach the host."""
    xp, _ = namespaces(out)
    if keep and out.shape[0] > keep:  # PPR reaches a whole component: each query's top nodes
        out = xp.where(topk_abs_mask(xp.ascontiguousarray(out), keep), out, 0)
    r, c = xp.nonzero(out > 0)
    host = [a.get() if hasattr(a, "get") else a for a in (r, c, out[r, c])]
    return host[0], host[1], np.asarray(host[2], np.float32)


def _seeds(
    cand: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    p: DiffusionParams,
    extra_seeds: pl.DataFrame | None,
) -> pl.DataFrame:
    """(query_idx, node_idx, energy): the fused seeds (speaker-boosted when asked) and the extra
    seeds, deduplicated by max energy (BME)."""
    if p.speaker_seed_boost:
        cand = cand.with_columns(
            pl.col(p.seed_from) * (1.0 + p.speaker_seed_boost * named_for(cand, nodes, queries))
        )
    seeds = seed_matrix(cand, p)
    if extra_seeds is not None and extra_seeds.height:
        seeds = (
            pl.concat([seeds, extra_seeds.cast(seeds.schema)])
            .group_by(["query_idx", "node_idx"])
            .agg(pl.col("energy").max())
            .sort(["query_idx", "node_idx"])
        )
    return seeds


def _scope(rows, qs, n_nodes, edges, seeds, p, device, hubs, hub_seeds, now) -> list[pl.DataFrame]:
    """The graph hits of one scope's queries (``qs``) over its nodes (``rows``), block by block
    of queries so that nodes × queries stays under ``p.block``."""
    if p.method == "expand":
        adj, inhib = directed_topn(edges, n_nodes, rows, p.per_node, now)
    else:
        adj, inhib = adjacency(edges, n_nodes, rows, now)
    cols = np.zeros(0, np.int64)
    if hubs is not None and p.method != "expand":
        adj, inhib, cols = hub_layer.augment(adj, inhib, hubs, rows)
    local = np.full(n_nodes, -1, np.int64)
    local[rows] = np.arange(len(rows))
    if p.method == "ppr":
        r, c, g = _ppr_hits(adj, rows, cols, qs, local, seeds, p, device, hub_seeds)
        return [pl.DataFrame({"query_idx": qs[c], "node_idx": rows[r], "graph": g})]
    step = max(1, p.block // max(1, len(rows) + len(cols)))
    if p.method == "pedsa":
        r, c, g = _pedsa_hits(adj, inhib, rows, cols, qs, local, seeds, p, device, hub_seeds)
        order = int_order(c // step, r, c)  # the rows of the dense blocks of `step` queries
        return [
            pl.DataFrame({"query_idx": qs[c[order]], "node_idx": rows[r[order]], "graph": g[order]})
        ]
    parts = []
    adj_d, inhib_d = _to_device(device, adj, inhib)  # once per scope, not per block of queries
    width = lambda b: min(step, len(qs) - b)  # noqa: E731
    for b in inner(range(0, len(qs), step), f"diffuse {p.method}", len(qs), "query", width):
        qb = qs[b : b + step]
        e0 = _initial_energy(seeds, qb, local, len(rows) + len(cols))
        if hub_seeds is not None:
            hub_layer.seed(e0, len(rows), qb, cols, hub_seeds, p.entity_seed_share)
        (e0,) = _to_device(device, e0)
        r, c, g = _hits(_solve(adj_d, inhib_d, e0, p)[: len(rows)], p.keep)
        parts.append(pl.DataFrame({"query_idx": qb[c], "node_idx": rows[r], "graph": g}))
    return parts


def _seed_entries(rows, cols, qs, local, seeds, p, hub_seeds):
    """A scope's seed energies as float32 (local row, query column, energy) entries: the seeds of
    its queries ``qs`` on its units, then the queries' entity hubs (rows after the units), each
    the value :func:`_initial_energy` and ``hubs.seed`` write into the dense block."""
    s = seeds.filter(pl.col("query_idx").is_in(qs.tolist()))
    row = local[s["node_idx"].to_numpy()]
    col = np.searchsorted(qs, s["query_idx"].to_numpy())
    e = s["energy"].to_numpy().astype(np.float32)
    ok = row >= 0
    row, col, e = row[ok], col[ok], e[ok]
    if hub_seeds is not None:
        hr, hc, he = hub_layer.seed_entries(
            _column_mass(row, col, e, len(qs)), len(rows), qs, cols, hub_seeds, p.entity_seed_share
        )
        row, col, e = np.r_[row, hr], np.r_[col, hc], np.r_[e, he.astype(np.float32)]
    return row, col, e


PEDSA_QUERIES = 2048  # queries per sparse PEDSA solve (each query's energies are its own)


def _pedsa_hits(adj, inhib, rows, cols, qs, local, seeds, p, device, hub_seeds):
    """PEDSA of a scope's queries from sparse seeds, ``PEDSA_QUERIES`` at a time (one product per
    step over all of them, on the device; a query's energies never read another's, so any block
    gives the bits of the dense blocks): (unit row, query column, energy) of each query's ``keep``
    largest |E| among the units (ties: lower row), positive ones only, as :func:`_hits` of the
    dense block; in no set order."""
    size = len(rows) + len(cols)
    row, col, e = _seed_entries(rows, cols, qs, local, seeds, p, hub_seeds)
    adj_d, inhib_d = _to_device(device, adj, inhib)  # once per scope
    out = []
    width = lambda a: min(PEDSA_QUERIES, len(qs) - a)  # noqa: E731
    for a in inner(range(0, len(qs), PEDSA_QUERIES), "diffuse pedsa", len(qs), "query", width):
        m = (col >= a) & (col < a + PEDSA_QUERIES)
        e0 = sp.csc_matrix((e[m], (row[m], col[m] - a)), shape=(size, width(a)))
        (e0,) = _to_device(device, e0)
        r, c, g = _sparse_hits(_solve(adj_d, inhib_d, e0, p), len(rows), p.keep)
        out.append((r, c + a, g))
    if not out:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.float32)
    return tuple(np.concatenate(x) for x in zip(*out))


def _sparse_hits(out, units: int, keep: int):
    """:func:`_hits` of the first ``units`` rows of a sparse (rows, B) result: the positive
    entries among each column's ``keep`` largest |E| (ties: lower row; 0 or ``units`` ≤ ``keep``:
    all), cut where ``out`` lives; only the hits reach the host."""
    xp, sp_ = namespaces(out.data)
    t = sp_.csc_matrix(out)
    c, r, v = segment_ids(xp, t.indptr, t.nnz), t.indices, t.data
    unit = r < units
    c, r, v = c[unit], r[unit], v[unit]
    if keep and units > keep:  # as topk_abs_mask of the dense block
        top = topk_entry_mask(xp, c, r, xp.abs(v), keep, out.shape[1])
        c, r, v = c[top], r[top], v[top]
    pos = v > 0
    r, c, v = (backend.to_host(x[pos]) for x in (r, c, v))
    return r.astype(np.int64), c.astype(np.int64), v.astype(np.float32)


def _ppr_hits(adj, rows, cols, qs, local, seeds, p, device, hub_seeds):
    """PPR of all of a scope's queries at once from sparse seeds: (unit row, query column, score)
    of each query's ``keep`` best units. Each column of seed energies (units, then hubs) sums to 1
    in float64 in row order, as the sum of the dense seed block's column."""
    size = len(rows) + len(cols)
    row, col, e = _seed_entries(rows, cols, qs, local, seeds, p, hub_seeds)
    mass = _column_mass(row, col, e, len(qs))
    e = (e / np.where(mass > 0, mass, 1.0)[col]).astype(np.float32)
    pers = sp.csr_matrix((e, (row, col)), shape=(size, len(qs)))
    adj_d, pers_d = _to_device(device, adj, pers)
    r, c, g, _info = SOLVERS[p.solver](adj_d, pers_d, len(rows), p)
    return r, c, g


def _column_mass(row, col, e, b: int) -> np.ndarray:
    """Per column, the float64 sum of its entries in ascending row order: the sum of a dense
    column (zeros add nothing)."""
    order = int_order(row, col)
    return np.bincount(col[order], weights=e[order].astype(np.float64), minlength=b)


def _initial_energy(
    seeds: pl.DataFrame, qb: np.ndarray, local: np.ndarray, size: int
) -> np.ndarray:
    """(size × len(qb)) float32 seed energies of the block's queries on the scope's local rows."""
    s = seeds.filter(pl.col("query_idx").is_in(qb.tolist()))
    col = np.searchsorted(qb, s["query_idx"].to_numpy())
    row = local[s["node_idx"].to_numpy()]
    ok = row >= 0
    e0 = np.zeros((size, len(qb)), np.float32)
    e0[row[ok], col[ok]] = s["energy"].to_numpy()[ok]
    return e0


def run(
    cand: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    edges: pl.DataFrame,
    p: DiffusionParams,
    device: str = "cpu",
    include_archived: bool = False,
    extra_seeds: pl.DataFrame | None = None,
    hubs: hub_layer.Hubs | None = None,
    hub_seeds: pl.DataFrame | None = None,
    now=None,
    parts: list | None = None,
) -> pl.DataFrame:
    """Returns (query_idx, node_idx, graph) for every node with positive energy. ``extra_seeds``
    (query_idx, node_idx, energy) join the fused seeds, deduplicated by max energy (BME). ``hubs``
    (entity and group layers) join each scope's graph; ``hub_seeds`` (query_idx, hub_idx, weight)
    seed them with ``entity_seed_share`` of the seed energy. Hubs never appear in the output. Edges
    whose validity window does not contain ``now`` (the reference time) carry nothing. ``parts``
    are the scope groups (default: ``scope_groups`` of the tables)."""
    require_one_of("diffusion.method", p.method, METHODS)
    require_one_of("diffuse.solver", p.solver, SOLVERS)
    empty = pl.DataFrame(schema={"query_idx": pl.Int64, "node_idx": pl.Int64, "graph": pl.Float32})
    if p.method == "none" or cand.height == 0:
        return empty
    seeds = _seeds(cand, nodes, queries, p, extra_seeds)
    if parts is None:
        parts = scope_groups(nodes, queries, include_archived)
    hits = []
    for _key, rows, qs in progress(parts, "diffuse", unit="scope"):
        if len(rows) and len(qs):
            hits += _scope(rows, qs, nodes.height, edges, seeds, p, device, hubs, hub_seeds, now)
    return pl.concat(hits).cast(empty.schema) if hits else empty


def _anchor_seeds(ctx, p: DiffusionParams) -> pl.DataFrame | None:
    """Extra seeds: residual hits (``diffuse.residual_seeds``), exact-name anchors and their cross
    recall; the anchors are kept on the context for co-occurrence."""
    from pipeline.stages import anchors

    extra = []
    if "residual" in ctx.cand.columns and p.residual_seeds:
        extra.append(
            ctx.cand.filter(pl.col("residual") > 0).select(
                "query_idx", "node_idx", energy="residual"
            )
        )
    if p.anchors is not None and p.anchors.enabled:
        ctx.anchors = anchors.of_group(ctx, p.anchors)
        extra.append(ctx.anchors)
        ctx.run.log.add("anchors", ctx.anchors.height)
        if p.cross_recall is not None and p.cross_recall.enabled:
            extra.append(
                anchors.cross(
                    ctx.anchors,
                    ctx.graph,
                    ctx.nodes,
                    ctx.queries,
                    mult=p.cross_recall.mult,
                    include_archived=p.include_archived,
                    now=ctx.now,
                )
            )
    return pl.concat([x.cast(anchors.SCHEMA) for x in extra]) if extra else None


def run_stage(ctx, p: DiffusionParams) -> object:
    """Diffuse from the group's seeds over its graph (and hubs); adds the ``graph`` component."""
    from pipeline.stages.fuse import join_component

    seeds_extra = _anchor_seeds(ctx, p)
    hub_seeds = (
        hub_layer.query_seeds(ctx.queries, ctx.hub_graph, ctx.hub_params, ctx.qseg)
        if p.entity_seed_share > 0
        else None
    )
    hits = run(
        ctx.cand,
        ctx.nodes,
        ctx.queries,
        ctx.graph,
        p,
        ctx.run.device,
        p.include_archived,
        seeds_extra,
        ctx.hub_graph,
        hub_seeds,
        now=ctx.now,
        # PPR keeps no dense (nodes × queries) block: a run may be a whole pack
        parts=ctx.diffusion_parts(1 << 62 if p.method == "ppr" else 1024),
    )
    ctx.run.log.add("graph_hits", hits.height)
    ctx.cand = join_component(ctx, hits, "graph")
    return ctx


def _params(run) -> DiffusionParams:
    """The ``diffuse`` group, with the ``anchors`` and ``cross_recall`` settings (extra seeds) and
    the run's ``include_archived``."""
    from pipeline.stages import anchors

    anchor_p, cross_p = anchors.params_of(run.cfg)
    return DiffusionParams.from_cfg(
        run.cfg.diffuse,
        "diffuse",
        include_archived=bool(run.cfg.include_archived),
        anchors=anchor_p,
        cross_recall=cross_p,
    )


STAGE = Stage(
    "diffuse", run_stage, enabled=lambda cfg: cfg.diffuse.method != "none", params=_params
)
