"""Fusion of channel candidates into one score per (query, node), vectorised over all queries.

- ``rrf``: weighted reciprocal rank fusion (ReMe): ``Σ_c w_c / (K + rank_c)`` over the channels whose
  list holds the node. ``single_branch_raw`` keeps ReMe's quirk: a query for which only one channel
  returned anything gets that channel's raw scores.
- ``wsum``: weighted sum of per-query normalised channel scores (``max``, ``minmax`` or ``none``).
- ``snake``: OKS's designed Snake Merge (spec §3.e): each backend's top ``top_n`` interleaved in
  snake order, A→B→C→C→B→A→A→B→C…, a node kept at its first place (duplicates dropped); the
  backends' order is ``order`` (default: the ``channels`` list). ``fused = 1 / (1 + place)``, the
  place counted over the interleaved sequence before dedupe (the order is the same); nodes in
  no backend's top ``top_n`` are dropped.

The arithmetic is ``pipeline.ops.fusion`` (array code on the run's device); this module reads the
columns out of the candidate frame, sends them there, and puts ``fused`` back.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl
from omegaconf import OmegaConf

from pipeline.contract.errors import ConfigError, require_one_of
from pipeline.core import backend
from pipeline.core.backend import fallback, host_column
from pipeline.core.stage import Params, Stage
from pipeline.ops import fusion
from pipeline.ops.topk import int_order

NORMS = ("max", "minmax", "none")
PAIR_KEY = "_pair_key"  # the packed (query, node) join key of join_component
FUSE_ON_HOST = "fusion on cpu (numpy)"  # the fallback note on cuda without CuPy


def _weights(weights: dict, channels: list[str]) -> dict[str, float]:
    """Weights of the enabled channels (weights of disabled channels are ignored)."""
    missing = [c for c in channels if c not in weights]
    if missing:
        raise ConfigError(
            f"fuse.weights has no weight for channels {missing}; add e.g. fuse.weights.{missing[0]}=0.5"
        )
    return {c: float(weights[c]) for c in channels}


@dataclass
class _Arrays:
    """A candidate frame's columns on the fusing device (``ops.fusion``'s inputs)."""

    query: object
    n: int  # query indices run 0..n-1
    chans: dict
    up: object  # host array → device array

    @classmethod
    def of(cls, cand: pl.DataFrame, channels: list[str], device: str, values: bool, ranks: bool):
        up = lambda a: backend.to_device(device, FUSE_ON_HOST, a)[0]  # noqa: E731
        col = lambda s: up(s.fill_null(0).cast(pl.Float64).to_numpy())  # noqa: E731
        known = lambda s: up(s.is_not_null().to_numpy())  # noqa: E731
        chans = {}
        for c in channels:
            v, r = (cand[c] if values else None), (cand[f"{c}_rank"] if ranks else None)
            chans[c] = fusion.Channel(
                col(v) if values else None,
                known(v) if values else None,
                col(r) if ranks else None,
                known(r) if ranks else None,
            )
        n = int(cand["query_idx"].max()) + 1
        return cls(up(cand["query_idx"].cast(pl.Int64).to_numpy()), n, chans, up)

    def weights(self, w: dict[str, float], channel_scale: dict | None) -> dict:
        """Each channel's weight: a float, or × its per-query scale (indexed by query) if given."""
        scale = channel_scale or {}
        return {
            c: self.up(v * np.asarray(scale[c], np.float64)) if c in scale else v
            for c, v in w.items()
        }


def _fused(cand: pl.DataFrame, fused, valid=None) -> pl.DataFrame:
    """``cand`` with the host column ``fused`` (Float64; null where ``valid`` is False)."""
    return cand.with_columns(host_column("fused", fused, valid))


def _empty(cand: pl.DataFrame) -> pl.DataFrame:
    return cand.with_columns(pl.Series("fused", [], dtype=pl.Float64))


def rrf(
    cand: pl.DataFrame,
    channels: list[str],
    weights: dict,
    k: int = 60,
    single_branch_raw: bool = False,
    channel_scale: dict | None = None,
    device: str = "cpu",
) -> pl.DataFrame:
    """Candidates with ``fused`` = weighted reciprocal-rank fusion of the channel ranks
    (``ops.fusion.rrf`` on ``device``)."""
    w = _weights(weights, channels)
    if not cand.height:
        return _empty(cand)
    a = _Arrays.of(cand, channels, device, values=single_branch_raw, ranks=True)
    fused, valid = fusion.rrf(
        a.query, a.chans, a.weights(w, channel_scale), k, a.n, single_branch_raw
    )
    return _fused(cand, fused, valid)


def wsum(
    cand: pl.DataFrame,
    channels: list[str],
    weights: dict,
    norm: dict | str = "max",
    channel_scale: dict | None = None,
    device: str = "cpu",
) -> pl.DataFrame:
    """Candidates with ``fused`` = weighted sum of the normalised channel scores
    (``ops.fusion.wsum`` on ``device``)."""
    w = _weights(weights, channels)
    how = {c: (norm if isinstance(norm, str) else norm.get(c, "max")) for c in channels}
    for c in channels:
        require_one_of(f"fuse.norm.{c}", how[c], NORMS)
    if not cand.height:
        return _empty(cand)
    a = _Arrays.of(cand, channels, device, values=True, ranks=False)
    return _fused(cand, fusion.wsum(a.query, a.chans, a.weights(w, channel_scale), how, a.n))


def snake(
    cand: pl.DataFrame,
    channels: list[str],
    top_n: int = 10,
    order: list | None = None,
    device: str = "cpu",
) -> pl.DataFrame:
    """Candidates in Snake Merge order (module docstring), ``fused`` = 1 / (1 + snake place)
    (``ops.fusion.snake`` on ``device``); rows in no backend's top ``top_n`` dropped."""
    seq = list(order) if order else list(channels)
    bad = [c for c in seq if c not in channels]
    if bad or len(set(seq)) != len(seq):
        raise ConfigError(
            f"fuse.order={seq} must name each enabled channel at most once; channels: {channels}"
        )
    if not cand.height:
        return _empty(cand)
    a = _Arrays.of(cand, seq, device, values=False, ranks=True)
    fused, kept = fusion.snake(a.chans, seq, top_n)
    return _fused(cand, fused).filter(pl.Series(backend.to_host(kept)))


METHODS = {"rrf": rrf, "wsum": wsum, "snake": snake}


def _options(fn) -> set[str]:
    return set(inspect.signature(fn).parameters) - {"cand", "channels", "device"}


def fuse(
    cand: pl.DataFrame, channels: list[str], method: str, device: str = "cpu", **params
) -> pl.DataFrame:
    """Adds a ``fused`` column (float64) to the candidates, computed on ``device``. Options of the
    other method (a preset's ``norm`` under ``fuse=rrf``, say) are ignored; unknown options are an
    error."""
    require_one_of("fuse.method", method, METHODS)
    mine = _options(METHODS[method])
    other = set().union(*(_options(f) for f in METHODS.values())) - mine
    unknown = sorted(set(params) - mine - other)
    if unknown:
        raise ConfigError(
            f"fuse.{unknown[0]} is not an option of fuse={method}; its options: {sorted(mine)}"
        )
    kw = {k: v for k, v in params.items() if k in mine}
    return METHODS[method](cand, channels, device=device, **kw)


def script_scaled(
    params: dict,
    english_only: bool,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    include_archived: bool = False,
    parts: list | None = None,
) -> dict:
    """Fusion params whose dense weight is × the non-Han letter share of each query's scope when the
    embedding model is English-only (``embed.english_only``): its cosine carries little on Chinese
    text, so in a CJK scope the lexical channel leads. Computed per scope over the nodes that scope's
    queries may see (never other scopes, queries or qrels); an English scope keeps its weight."""
    from pipeline.ops.scope import scope_groups
    from pipeline.ops.tokenize import han_letters

    if not english_only or "dense" not in params.get("weights", {}):
        return params
    han, letters = han_letters(nodes["text"].fill_null("").to_list())
    scale = np.ones(queries.height)
    for _key, nodes_s, qs in parts or scope_groups(nodes, queries, include_archived):
        total = letters[nodes_s].sum()
        scale[qs] = 1.0 - han[nodes_s].sum() / total if total else 1.0
    if scale.min() == 1.0:
        return params
    fallback(
        f"embed.english_only: dense fusion weight × non-Han share of the scope "
        f"({scale.min():.3f}–{scale.max():.3f})"
    )
    return {**params, "channel_scale": {"dense": scale}}


@dataclass(frozen=True)
class FuseParams(Params):
    """The ``fuse`` stage's parameters: the ``fuse`` group's ``method`` and its other keys
    (``options``: ``weights``, ``k``, ``norm``…; another method's are ignored, :func:`fuse`), and
    what the run adds: the enabled ``channels`` (in the ``channels`` list's order),
    ``embed.english_only`` and ``include_archived`` (:func:`script_scaled`), and ``dense.index``
    (where a later component's new pairs read the node vectors, ``dense.resident``). The stage
    leaves them, scaled, on ``ctx.fusion``: every later component is fused with them."""

    GROUP: ClassVar[str] = "fuse"
    method: str
    options: dict
    channels: tuple
    english_only: bool
    include_archived: bool
    dense_index: str | None

    @classmethod
    def of(cls, run) -> FuseParams:
        """The parameters of a run (a ``RunState``)."""
        cfg = run.cfg
        conf = OmegaConf.to_container(cfg.fuse, resolve=True)
        method = conf.pop("method")
        return cls(
            method,
            conf,
            tuple(cfg.channels),
            bool(cfg.embed.get("english_only", False)),
            bool(cfg.include_archived),
            cfg.dense.get("index"),
        )

    def apply(self, cand: pl.DataFrame, device: str) -> pl.DataFrame:
        """:func:`fuse` of ``cand`` with these settings on ``device``."""
        return fuse(cand, list(self.channels), self.method, device, **self.options)


def run_stage(ctx, p: FuseParams) -> object:
    """Fuse the channel scores into ``fused``; keeps the settings for the components added later."""
    scaled = script_scaled(
        p.options,
        p.english_only
        and "embedding" not in ctx.nodes.columns
        and "dense" in p.channels,  # no dense channel: nothing to scale, nothing to report
        ctx.nodes,
        ctx.queries,
        p.include_archived,
        ctx.segments,
    )
    ctx.fusion = p if scaled is p.options else dataclasses.replace(p, options=scaled)
    ctx.cand = ctx.fusion.apply(ctx.cand, ctx.run.device)
    return ctx


JOIN_QUERIES = 1024  # queries per block of :func:`join_component`


def join_component(ctx, hits: pl.DataFrame, column: str) -> pl.DataFrame:
    """The candidates with a new score component (graph energy, residual similarity) joined on;
    nodes it alone found get their exact cosine (when the dense channel is on), and everything is
    fused again with the other components at 0. Done per block of ``JOIN_QUERIES`` consecutive
    query indices (every step reads one query's rows only: pairs, per-query normalisation), so a
    block's arrays stay small enough to reuse memory; rows in no set order."""
    q = ctx.cand["query_idx"].to_numpy()
    if not (len(q) and hits.height) or (len(q) > 1 and bool((q[1:] < q[:-1]).any())):
        return _join_block(ctx, ctx.cand, hits, column)
    h = hits["query_idx"].to_numpy()
    lo = min(int(q[0]), int(h.min()))
    hb = (h - lo) // JOIN_QUERIES
    if len(hb) > 1 and bool((hb[1:] < hb[:-1]).any()):  # the solvers give them in query order
        order = int_order(hb)  # few blocks: a radix sort
        hits, hb = hits[order], hb[order]
    top = max(int(q[-1]), int(h.max())) - lo
    starts = lo + np.arange(0, top + 1, JOIN_QUERIES)
    cq = np.searchsorted(q, np.r_[starts, lo + top + 1])
    ch = np.searchsorted(hb, np.arange(len(starts) + 1))
    return pl.concat(
        [
            _join_block(ctx, ctx.cand[cq[i] : cq[i + 1]], hits[ch[i] : ch[i + 1]], column)
            for i in range(len(starts))
        ],
        rechunk=True,  # one chunk per column, as one join leaves it, for the stages after
    )


def _join_block(ctx, cand: pl.DataFrame, hits: pl.DataFrame, column: str) -> pl.DataFrame:
    """:func:`join_component` of some queries' candidates and hits."""
    from pipeline.channels import dense
    from pipeline.channels.candidates import dense_pairs

    settings = ctx.fusion
    out = _join_pairs(cand, hits)
    if "dense" in settings.channels:
        new = out["dense"].is_null().to_numpy()
        if new.any():
            qi, ni = out["query_idx"].to_numpy()[new], out["node_idx"].to_numpy()[new]
            d = out["dense"].to_numpy().copy()
            d[new] = dense_pairs(*ctx.vectors, dense.resident(ctx, settings.dense_index), qi, ni)
            out = out.with_columns(dense=pl.Series(d, dtype=pl.Float32))
    out = settings.apply(out.drop("fused"), ctx.run.device)
    return out.with_columns(pl.col(column).fill_null(0.0))


def _join_pairs(cand: pl.DataFrame, hits: pl.DataFrame) -> pl.DataFrame:
    """The full join of ``cand`` and ``hits`` on (query_idx, node_idx), rows in no set order. When
    both keys fit in 31 bits and the two frames' key types agree, each pair is one packed int64
    (query << 32 | node) and the join is a binary search of the hits' keys among the sorted
    candidates' (:func:`_merge_pairs`); with a pair repeated within a frame, on that packed key by
    polars; else on the two columns."""
    on = ["query_idx", "node_idx"]
    if not _packable(cand, hits, on):
        return cand.join(hits, on=on, how="full", coalesce=True)
    key = lambda f: f[on[0]].to_numpy().astype(np.int64) << 32 | f[on[1]].to_numpy()  # noqa: E731
    kc, kh = key(cand), key(hits)
    merged = _merge_pairs(cand, hits.drop(on), kc, kh)
    if merged is not None:
        return merged
    out = cand.with_columns(pl.Series(PAIR_KEY, kc)).join(
        hits.drop(on).with_columns(pl.Series(PAIR_KEY, kh)), on=PAIR_KEY, how="full", coalesce=True
    )
    k = pl.col(PAIR_KEY)
    pair = [
        (k // (1 << 32)).cast(cand.schema[on[0]]).alias(on[0]),
        (k % (1 << 32)).cast(cand.schema[on[1]]).alias(on[1]),
    ]
    rest = [c for c in hits.columns if c not in on]
    return out.with_columns(pair).drop(PAIR_KEY).select(cand.columns + rest)


def _merge_pairs(cand: pl.DataFrame, extra: pl.DataFrame, kc: np.ndarray, kh: np.ndarray):
    """The full join of ``cand`` (keys ``kc``) and the hit columns ``extra`` (keys ``kh``) when no
    key repeats within a side: the candidates, each with its hit's columns (null where none), then
    the hits no candidate has (candidate columns null but the pair). None when a key repeats
    (or ``extra`` has no column)."""
    if not extra.width:
        return None
    distinct = lambda k: len(k) < 2 or bool((k[1:] != k[:-1]).all())  # noqa: E731
    ordered = lambda k: len(k) < 2 or bool((k[1:] > k[:-1]).all())  # noqa: E731
    oc = None if ordered(kc) else np.argsort(kc)
    # sorted needles: the binary searches walk the candidates in order
    oh = np.arange(len(kh)) if ordered(kh) else np.argsort(kh)
    sc, sh = (kc if oc is None else kc[oc]), kh[oh]
    if not (distinct(sc) and distinct(sh)):
        return None
    at = np.minimum(np.searchsorted(sc, sh), len(sc) - 1)
    hit = sc[at] == sh
    take = np.full(len(kc), -1, np.int64)
    take[at[hit] if oc is None else oc[at[hit]]] = oh[hit]
    met = np.zeros(len(kh), bool)
    met[oh[hit]] = True
    t = pl.Series("take", take)
    gathered = extra.select(pl.all().gather(pl.when(t >= 0).then(t)))
    rest = kh[~met]
    pairs = pl.DataFrame({"query_idx": rest >> 32, "node_idx": rest & 0xFFFFFFFF})
    new = pairs.cast({c: cand.schema[c] for c in pairs.columns}).hstack(extra.filter(~met))
    return pl.concat([cand.hstack(gathered), new], how="diagonal")


def _packable(cand: pl.DataFrame, hits: pl.DataFrame, on: list[str]) -> bool:
    """Both frames non-empty, their key columns integers of one type, within [0, 2**31)."""
    if not (cand.height and hits.height) or PAIR_KEY in cand.columns + hits.columns:
        return False
    for c in on:
        if cand.schema[c] != hits.schema[c] or not cand.schema[c].is_integer():
            return False
        if min(cand[c].min(), hits[c].min()) < 0 or max(cand[c].max(), hits[c].max()) >= 1 << 31:
            return False
    return True


STAGE = Stage("fuse", run_stage, params=FuseParams.of)
