"""One group's recall: every stage after embedding, run on the nodes that group's queries may see.

A group (``ops.scope.run_groups``) is the queries that see the same node set — their ``doc_scope``
∩ ``visibility`` ∩ not archived (unless ``include_archived``) — at the same reference time. A
query's result is a function of its own row, those nodes, the edges among them, the recipe and the
code: channels, fusion, novelty, the graph (explicit edges with both ends visible, temporal chain,
mention and kNN edges), the hubs (entity document counts, ``max_df``, 1/df weights, synonyms), the
signals (PageRank, Leiden, degree), diffusion, anchors, co-occurrence, score and selection all see
only the group's nodes. ``runner.run``, ``recall precompute`` and the Ray executor all call
:func:`run_group`, so their answers agree by construction. Node embeddings are computed once per run
and sliced; indices are local to the group and mapped back to ids by :func:`to_recall`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline import feedback, io, version
from pipeline.channels import candidates
from pipeline.errors import ConfigError
from pipeline.stages import (anchors, channels, cooccur, diffuse, fuse, graph, hubs, novelty, probrecall, score,
                             scope_policy, signals)
from pipeline.stages.embed import embed_cached
from pipeline.stages.select import SelectParams, select


@dataclass
class Shared:
    """What a run computes once and every group slices: config, embeddings of all nodes and of
    every query part (``query.plan``), the memo of ``corpus_step`` and the timer."""
    cfg: DictConfig
    ds: object
    device: str
    timer: object
    memo: dict | None = None
    encoder: object = None
    cache: object = None
    xb: np.ndarray | None = None
    xparts: np.ndarray | None = None
    part_q: np.ndarray | None = None
    part_w: np.ndarray | None = None
    until: str | None = None  # "novelty": stop each group after the novelty stage (recall analyze)
    edge_index: object = None  # ops.scope.EdgeIndex over the run's nodes: each group's explicit edges
    consts: dict = field(default_factory=dict)  # per-run values every group reads (params, key prefixes)

    def const(self, name: str, build):
        """A value that depends on the run only (config-derived params, hashes): built once."""
        if name not in self.consts:
            self.consts[name] = build()
        return self.consts[name]


@dataclass
class Group:
    nodes: pl.DataFrame
    queries: pl.DataFrame
    now: dt.datetime  # the group's reference time (``ops.scope.run_groups``)
    key: str = ""  # the group's (scope, viewer, reference time), as text
    xb: np.ndarray | None = None
    xparts: np.ndarray | None = None
    part_q: np.ndarray | None = None
    part_w: np.ndarray | None = None
    xq: np.ndarray | None = None
    edges: pl.DataFrame | None = None  # the explicit edges with both ends in the group (None: look in ds.edges)


@dataclass
class GroupOut:
    recall: pl.DataFrame
    novelty: pl.DataFrame | None = None
    signals: pl.DataFrame | None = None
    freshness: dict = field(default_factory=lambda: {"status": "disabled"})
    reused: list = field(default_factory=list)


def corpus_step(memo: dict | None, name: str, nodes: pl.DataFrame, compute):
    """Query-independent work on a node table (embeddings, graph, hubs, signals): computed once per
    node table when ``memo`` is given. A Ray worker keeps one memo across the shards it runs."""
    if memo is None:
        return compute()
    key = (name, nodes.shape, tuple(nodes.columns), int(nodes.hash_rows(seed=0).sum()))
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def count(timer, name: str, n: int) -> None:
    """A per-query count: summed over groups (and over Ray shards)."""
    timer.rows[name] = timer.rows.get(name, 0) + int(n)


def count_max(timer, name: str, n: int) -> None:
    """A per-group size (graph edges, hubs): the largest group's, whichever way queries were split."""
    timer.rows[name] = max(timer.rows.get(name, 0), int(n))


def slice_group(sh: Shared, nodes: pl.DataFrame, queries: pl.DataFrame, key: tuple, rows: np.ndarray,
                qs: np.ndarray, now: dt.datetime) -> Group:
    """The group's nodes, queries and embeddings (query parts renumbered to the group's queries)."""
    scope, viewer, _t = key
    g = Group(nodes[rows], queries[qs], now, f"{list(scope) if scope is not None else None}|{viewer}|{now.isoformat()}")
    if sh.edge_index is not None:
        g.edges = sh.edge_index.within(rows)
    if sh.xb is not None:
        g.xb = sh.xb if len(rows) == len(sh.xb) else np.ascontiguousarray(sh.xb[rows])
        sel = np.isin(sh.part_q, qs)
        g.xparts, g.part_w = sh.xparts[sel], sh.part_w[sel]
        g.part_q = np.searchsorted(qs, sh.part_q[sel])
        g.xq = g.xparts[np.r_[0, np.flatnonzero(np.diff(g.part_q)) + 1]]
    return g


def merge_signals(parts: list) -> pl.DataFrame | None:
    """One signals row per node: a node several groups see keeps the row of the group whose
    ``group_key`` (scope, viewer, reference time) sorts first, whichever way the queries were run."""
    frames = [p for p in parts if p is not None and p.height]
    if not frames:
        return None
    return (pl.concat(frames, how="diagonal_relaxed").sort("node_id", "group_key")
            .unique("node_id", keep="first", maintain_order=True))


def to_recall(sel: pl.DataFrame, ds_nodes: pl.DataFrame, queries: pl.DataFrame, enabled: list[str],
              extra: list[str] = (), group_docs: bool = False) -> pl.DataFrame:
    found = [pl.when(pl.col(f"{c}_rank").is_not_null()).then(pl.lit(c)) for c in enabled]
    for comp in ("residual", "graph"):
        if comp in sel.columns:
            found.append(pl.when(pl.col(comp) > 0).then(pl.lit(comp)))
    if "probabilistic" in sel.columns:
        found.append(pl.when(pl.col("probabilistic")).then(pl.lit("probabilistic")))
    out = sel.with_columns(
        query_id=pl.Series(queries["query_id"].to_numpy()[sel["query_idx"].to_numpy()], dtype=pl.String),
        node_id=pl.Series(ds_nodes["node_id"].to_numpy()[sel["node_idx"].to_numpy()], dtype=pl.String),
        channel=pl.concat_str(found, separator="+", ignore_nulls=True),
    )
    cols = ["query_id", "rank", "node_id", "score", "channel", *enabled, "fused",
            *[c for c in ("residual", "graph") if c in sel.columns], *extra,
            *(["dpp_gain"] if "dpp_gain" in sel.columns else [])]
    if "doc_id" in ds_nodes.columns:
        out = out.with_columns(doc_id=pl.Series(ds_nodes["doc_id"].to_numpy()[sel["node_idx"].to_numpy()], dtype=pl.String))
        cols.insert(3, "doc_id")
        if group_docs:  # ReMe node-level surface: the document's front-matter name and description
            for src, dst in (("title", "doc_title"), ("description", "doc_summary")):
                if src in ds_nodes.columns:
                    # gather, not numpy: a column with nulls is an object array, and an empty one cannot be cast
                    out = out.with_columns(ds_nodes[src].cast(pl.String).gather(sel["node_idx"]).alias(dst))
                    cols.insert(cols.index("doc_id") + 1, dst)
    return out.select(cols)


def add_component(cand: pl.DataFrame, g: pl.DataFrame, column: str, enabled: list[str], xb, parts,
                  fusion: dict) -> pl.DataFrame:
    """Join a new score component (graph energy, residual similarity) onto the candidates; nodes it
    alone found get their exact cosine (when the dense channel is on) and are fused again with the
    other components at 0."""
    out = cand.join(g, on=["query_idx", "node_idx"], how="full", coalesce=True)
    if "dense" in enabled:
        new = out["dense"].is_null().to_numpy()
        if new.any():
            qi, ni = out["query_idx"].to_numpy()[new], out["node_idx"].to_numpy()[new]
            d = out["dense"].to_numpy().copy()
            d[new] = candidates.dense_pairs(*parts, xb, qi, ni)
            out = out.with_columns(dense=pl.Series(d, dtype=pl.Float32))
    out = fuse.fuse(out.drop("fused"), enabled, fusion["method"], **{k: v for k, v in fusion.items() if k != "method"})
    return out.with_columns(pl.col(column).fill_null(0.0))


def stage_key(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, keys: list[str],
              prefix: bytes | None = None) -> str:
    """Fingerprint of a stage's inputs: the config keys it reads, the input files, the node and
    query tables, the code version. Finished stages are cached under it and reused by a rerun.
    ``prefix`` is :func:`key_prefix` of (cfg, ds, keys) when the caller has it already."""
    h = hashlib.sha256(key_prefix(cfg, ds, keys) if prefix is None else prefix)
    for frame in (nodes, queries):
        h.update(str(frame.hash_rows(seed=0).sum()).encode() + str(frame.shape).encode())
    return h.hexdigest()[:20]


def key_prefix(cfg: DictConfig, ds, keys: list[str]) -> bytes:
    """The part of :func:`stage_key` that does not depend on the group: config keys, data config,
    input files, code version."""
    parts = [io.config_hash({k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k])
                             else cfg[k] for k in keys}),
             io.config_hash(OmegaConf.to_container(cfg.data, resolve=True)),
             io.config_hash(sorted(ds.fingerprints.items())), version.code_version()]
    return "".join(parts).encode()


def _candidates(sh: Shared, g: Group, enabled: list[str]) -> tuple[pl.DataFrame, bool]:
    """Channel candidates of the group, cached on disk under the stage key (True when reused)."""
    cfg = sh.cfg
    keys = ["channels", "dense", "lexical", "embed", "query", "include_archived", "seed"]
    key = stage_key(cfg, sh.ds, g.nodes, g.queries, keys, sh.const("key:channels", lambda: key_prefix(cfg, sh.ds, keys)))
    path = Path(cfg.cache_dir) / "candidates" / f"{key}.parquet"
    if path.exists():
        return pl.read_parquet(path), True
    dense_p = sh.const("dense", lambda: channels.DenseParams(**cfg.dense))
    lex_p = sh.const("lexical", lambda: channels.LexicalParams(**OmegaConf.to_container(cfg.lexical, resolve=True)))
    cand = candidates.generate(g.nodes, g.queries, enabled, g.xb, g.xparts, dense_p, lex_p, sh.device,
                               cfg.seed, cfg.include_archived, g.part_q, g.part_w)
    io.write_parquet(path, cand)
    return cand, False


def _graph(sh: Shared, g: Group, enabled: list[str]):
    """(edges, hub graph, hub params) of the group's nodes; memoised per node table."""
    cfg = sh.cfg
    gp = sh.const("graph", lambda: graph.GraphParams(**OmegaConf.to_container(cfg.graph, resolve=True)))
    # dangling / self-loop edges are counted once for the whole corpus by runner.run
    explicit = sh.ds.edges if g.edges is None else g.edges
    edges = corpus_step(sh.memo, "graph", g.nodes, lambda: graph.build(g.nodes, explicit, gp, g.xb, Counter()))
    hub_p, hub_graph = sh.const("hubs", lambda: hubs.HubParams(**gp.hubs)), None
    if cfg.diffuse.method != "none":
        embed = (lambda t: embed_cached(sh.encoder, t, sh.cache, sh.device)[0]) if "dense" in enabled else None
        hub_graph = corpus_step(sh.memo, "hubs", g.nodes, lambda: hubs.build(g.nodes, hub_p, embed))
    count_max(sh.timer, "graph_edges", edges.height)
    count_max(sh.timer, "hubs", 0 if hub_graph is None else hub_graph.size)
    return edges, hub_graph, hub_p


def _signals(sh: Shared, g: Group, edges: pl.DataFrame):
    """(nodes with a feedback table's state overlaid, signals table or None, freshness), at the
    group's reference time; the table carries ``group_key`` (see :func:`merge_signals`)."""
    sig_p = sh.const("signals", lambda: signals.SignalsParams(**OmegaConf.to_container(sh.cfg.signals, resolve=True),
                                                              device=sh.device))
    nodes, table, fresh = corpus_step(sh.memo, f"signals@{g.now.isoformat()}", g.nodes,
                                      lambda: feedback.resolve(g.nodes, edges, g.now, sig_p))
    if table is not None:
        table = table.with_columns(group_key=pl.lit(g.key, pl.String))
    return nodes, table, fresh


def _diffuse(sh: Shared, g: Group, cand, edges, hub_graph, hub_p, enabled, fusion) -> tuple:
    """(candidates with the graph component, exact-name anchors or None)."""
    cfg, found, extra = sh.cfg, None, []
    dp = sh.const("diffuse", lambda: diffuse.DiffusionParams(**cfg.diffuse))
    if "residual" in cand.columns and cfg.novelty.seed_diffusion:
        extra.append(cand.filter(pl.col("residual") > 0).select("query_idx", "node_idx", energy="residual"))
    if cfg.query.anchors:
        found = anchors.find(g.nodes, g.queries, min_len=cfg.query.anchor_min_len, energy=cfg.query.anchor_energy,
                             include_archived=cfg.include_archived)
        extra.append(found)
        count(sh.timer, "anchors", found.height)
        if cfg.query.cross_recall:
            extra.append(anchors.cross(found, edges, g.nodes, g.queries, mult=cfg.query.cross_mult,
                                       include_archived=cfg.include_archived, now=g.now))
    seeds_extra = pl.concat([x.cast(anchors.SCHEMA) for x in extra]) if extra else None
    hub_seeds = hubs.query_seeds(g.queries, hub_graph, hub_p) if dp.entity_seed_share > 0 else None
    hits = diffuse.run(cand, g.nodes, g.queries, edges, dp, sh.device, cfg.include_archived, seeds_extra,
                       hub_graph, hub_seeds, now=g.now)
    count(sh.timer, "graph_hits", hits.height)
    return add_component(cand, hits, "graph", enabled, g.xb, (g.xparts, g.part_q, g.part_w), fusion), found


def _select(sh: Shared, g: Group, cand, nodes, sig_table, enabled) -> pl.DataFrame:
    """Score, scope policy, selection (and probabilistic recall) → the group's recall rows."""
    cfg, timer = sh.cfg, sh.timer
    with timer.stage("score"):
        terms, factors = dict(cfg.score.terms), list(cfg.score.factors)
        names = [n for n, w in terms.items() if w] + factors
        cand = score.attach(cand, nodes, g.queries, sig_table, names, g.now)
        pol = scope_policy.apply(cand, nodes, g.queries, sh.const("scope", lambda: scope_policy.ScopeParams(**cfg.scope)))
        cand = score.compute(pol.cand, terms, factors + pol.factors, bool(cfg.score.normalize))
    with timer.stage("select"):
        doc_idx = nodes["doc_id"].fill_null(nodes["node_id"]).rank("dense").to_numpy() if "doc_id" in nodes.columns else None
        sel_kw = sh.const("select", lambda: {k: v for k, v in cfg.select.items() if k != "prob_recall"})
        sel = select(cand, int(cfg.k), SelectParams(**sel_kw, sort_by=tuple(pol.sort_by)), g.xb, sh.device, doc_idx)
        pr = cfg.select.prob_recall
        if pr.enabled:
            sel = probrecall.append(sel, nodes, g.queries, int(cfg.k), p=pr.p, min_importance=pr.min_importance,
                                    seed=cfg.seed, include_archived=cfg.include_archived)
        extra = [n for n in names if n in score.TERMS or n in score.FACTORS] + pol.factors + pol.sort_by
        extra += ["cooccur"] if "cooccur" in sel.columns else []
        return to_recall(sel, nodes, g.queries, enabled, extra, bool(cfg.select.top_chunks_per_doc))


def run_group(sh: Shared, g: Group) -> GroupOut:
    """Every stage after embedding for one group (see the module docstring)."""
    cfg, timer, out = sh.cfg, sh.timer, GroupOut(None)
    enabled = list(cfg.channels)
    with timer.stage("channels"):
        cand, reused = _candidates(sh, g, enabled)
        out.reused += ["channels"] if reused else []
    count(timer, "candidates", cand.height)
    with timer.stage("fuse"):
        fusion = fuse.script_scaled(sh.const("fusion", lambda: OmegaConf.to_container(cfg.fusion, resolve=True)),
                                    bool(cfg.embed.get("english_only", False)), g.nodes, g.queries,
                                    cfg.include_archived)
        cand = fuse.fuse(cand, enabled, fusion["method"], **{k: v for k, v in fusion.items() if k != "method"})
    if cfg.novelty.enabled:
        if g.xb is None:
            raise ConfigError("novelty.enabled needs embeddings: enable the dense channel")
        with timer.stage("novelty"):
            nov_p = novelty.NoveltyParams(**{k: v for k, v in OmegaConf.to_container(cfg.novelty).items()
                                             if k != "seed_diffusion"})
            out.novelty, hits = novelty.run(cand, g.nodes, g.queries, g.xb, g.xq, nov_p, sh.device, cfg.include_archived)
            cand = add_component(cand, hits, "residual", enabled, g.xb, (g.xparts, g.part_q, g.part_w), fusion)
        count(timer, "residual_hits", hits.height)
        if sh.until == "novelty":
            return out
    edges, nodes = None, g.nodes
    if cfg.diffuse.method != "none" or cfg.signals.enabled:
        with timer.stage("graph"):
            edges, hub_graph, hub_p = _graph(sh, g, enabled)
    if cfg.signals.enabled:
        with timer.stage("signals"):
            nodes, out.signals, out.freshness = _signals(sh, g, edges)
    found = None  # exact-name anchors: diffusion seeds and co-occurrence anchors, found once
    if cfg.diffuse.method != "none":
        with timer.stage("diffuse"):
            cand, found = _diffuse(sh, g, cand, edges, hub_graph, hub_p, enabled, fusion)
    if cfg.query.cooccur.enabled:
        with timer.stage("cooccur"):
            if found is None and cfg.query.anchors:
                found = anchors.find(g.nodes, g.queries, min_len=cfg.query.anchor_min_len,
                                     energy=cfg.query.anchor_energy, include_archived=cfg.include_archived)
            bonus = cooccur.boost(cand, g.nodes, g.queries, found, cooccur.CooccurParams(**cfg.query.cooccur),
                                  cfg.include_archived)
            cand = cooccur.merge(cand, bonus)
        count(timer, "cooccur_boosts", bonus.height)
    out.recall = _select(sh, g, cand, nodes, out.signals, enabled)
    return out
