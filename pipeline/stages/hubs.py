"""Hub layers of the graph: virtual nodes that carry energy between units and never reach outputs.

- **entity layer** (HippoRAG's phrase nodes without an LLM): every entity key that
  :func:`pipeline.ops.entities.extract` finds in a unit's text is a hub linked to the units that
  mention it, edge weight ``entity_weight / df**df_power``; entities in more than ``max_df`` of the
  units are dropped (they connect everything and carry nothing).
- **synonym links** between entity hubs whose key embeddings have cosine ≥ ``synonym_threshold``
  (HippoRAG 2 uses 0.8), found with a FAISS kNN over the keys, weight ``synonym_weight × cosine``.
- **group layers** (conversation links): each distinct value of a node column (``doc_id`` = session,
  ``speaker``) is a hub linked to the units carrying it, weight ``w / size**df_power``.

``build`` returns a :class:`Hubs` (an (N × H) incidence matrix and an (H × H) synonym matrix); the
diffusion stage appends the hubs of each scope to that scope's adjacency. ``query_seeds`` gives the
entity hubs a query's own text mentions, weighted by specificity (``1 / df**df_power``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.core.stage import Params
from pipeline.ops import entities, entity_cache


@dataclass(frozen=True)
class HubParams(Params):
    """Hub layer settings: entity, synonym and group hubs and their weights."""

    GROUP: ClassVar[str] = "graph"
    OPTION: ClassVar[str] = "default"  # what Params.defaults() loads
    SUBKEY: ClassVar[str | None] = "hubs"
    entities: bool
    entity_weight: float
    df_power: float
    max_df: float  # fraction of units; an entity in more units is dropped
    numbers: bool
    quoted: bool
    subwords: bool  # also each capitalised word of a multi-word span ("Obama")
    synonym_k: int  # 0 = no synonym links
    synonym_threshold: float
    synonym_weight: float
    groups: dict  # node column → weight of its value hubs


@dataclass
class Hubs:
    """The hub layer: unit-hub incidence, hub-hub synonym links, hub names and units per hub."""

    inc: sp.csr_matrix  # (N units × H hubs)
    syn: sp.csr_matrix  # (H × H), symmetric
    keys: list[str]  # hub names: "entity:<key>" or "<column>:<value>"
    df: np.ndarray  # units per hub
    entity_index: dict[tuple, int]  # (segment, entity key) → hub index

    @property
    def size(self) -> int:
        """Number of hubs."""
        return len(self.keys)


def _extract_kw(p: HubParams) -> dict:
    return {"numbers": p.numbers, "quoted": p.quoted, "subwords": p.subwords}


def _entity_pairs(
    nodes: pl.DataFrame, p: HubParams, seg: np.ndarray, cache: Path | None = None
) -> tuple[list[str], np.ndarray, np.ndarray, list[tuple]]:
    """Entity hubs per segment (``seg``: each unit's): df and the ``max_df`` cut counted within
    the segment; hubs sorted by (segment, key). Returns names, units, hubs and (segment, key) per
    hub. ``cache``: the folder of cached entity mentions (``ops.entity_cache``)."""
    # each unit's keys, and the distinct keys in code-point order (the byte order of their UTF-8)
    unit, kid, keys = entity_cache.extract_ids(nodes["text"].to_list(), cache, **_extract_kw(p))
    if not keys:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64), []
    pair = seg[unit] * len(keys) + kid
    combo, at, df = np.unique(pair, return_inverse=True, return_counts=True)  # (segment, key)
    c_seg, c_key = combo // len(keys), combo % len(keys)
    size = np.bincount(seg, minlength=int(seg.max(initial=-1)) + 1)
    limit = np.maximum(1, (p.max_df * np.maximum(1, size)).astype(np.int64))
    kept = df <= limit[c_seg]
    hub = np.where(kept, np.cumsum(kept) - 1, -1)[at]  # hubs in (segment, key) order
    unit, hub = unit[hub >= 0], hub[hub >= 0]
    order = np.lexsort((unit, hub))
    names = [keys[k] for k in c_key[kept].tolist()]
    return names, unit[order], hub[order], list(zip(c_seg[kept].tolist(), names))


def _group_pairs(
    nodes: pl.DataFrame, col: str, seg: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray]:
    if col not in nodes.columns:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    v = pl.DataFrame({"seg": seg, "v": nodes[col].cast(pl.String)}).with_row_index("unit")
    v = v.filter(pl.col("v").is_not_null())
    vals = v.select("seg", "v").unique().sort("seg", "v").with_row_index("hub")
    hit = v.join(vals, on=["seg", "v"], how="left", maintain_order="left")
    names = [f"{col}:{x}" for x in vals["v"].to_list()]
    return names, hit["unit"].cast(pl.Int64).to_numpy(), hit["hub"].cast(pl.Int64).to_numpy()


def _synonyms(
    keys: list[str], embed: Callable[[list[str]], np.ndarray], p: HubParams
) -> sp.csr_matrix:
    from pipeline.channels import dense

    h = len(keys)
    if p.synonym_k <= 0 or h < 2:
        return sp.csr_matrix((h, h), dtype=np.float32)
    x = np.ascontiguousarray(embed(keys), dtype=np.float32)
    D, I = dense.search(dense.build_index(x), x, p.synonym_k + 1)
    src = np.repeat(np.arange(h), I.shape[1])
    dst, sim = I.ravel(), D.ravel()
    ok = (dst >= 0) & (dst != src) & (sim >= p.synonym_threshold)
    s, d, w = src[ok], dst[ok], (p.synonym_weight * sim[ok]).astype(np.float32)
    # a pair found from both ends counts once, symmetric
    both = (
        pl.DataFrame({"a": np.minimum(s, d), "b": np.maximum(s, d), "w": w})
        .group_by("a", "b")
        .agg(pl.col("w").max())
    )
    a, b, ww = both["a"].to_numpy(), both["b"].to_numpy(), both["w"].to_numpy().astype(np.float32)
    return sp.coo_matrix((np.r_[ww, ww], (np.r_[a, b], np.r_[b, a])), shape=(h, h)).tocsr()


def build(
    nodes: pl.DataFrame,
    p: HubParams,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    seg: np.ndarray | None = None,
    cache: Path | None = None,
) -> Hubs | None:
    """The hub layers of ``nodes`` (None when no layer is enabled). With ``seg`` (the segment of
    each node: scope groups laid end to end, ``querypath``) every segment gets its own hubs and
    counts, as if built from its nodes alone; without, one segment. ``cache``: the folder of the
    nodes' cached entity mentions (``ops.entity_cache``; None: read afresh)."""
    seg = np.zeros(nodes.height, np.int64) if seg is None else seg
    layers = []  # (names, units, hubs, weight per unit-hub pair)
    ent_keys: list[str] = []
    ent_index: list[tuple] = []
    if p.entities:
        ent_keys, u, hb, ent_index = _entity_pairs(nodes, p, seg, cache)
        layers.append(([f"entity:{k}" for k in ent_keys], u, hb, p.entity_weight))
    for col, w in sorted((p.groups or {}).items()):
        if w:
            names, u, hb = _group_pairs(nodes, col, seg)
            layers.append((names, u, hb, float(w)))
    if not layers:
        return None
    keys, rows, cols, vals, offset = [], [], [], [], 0
    df = []
    for names, u, hb, w in layers:
        cnt = np.bincount(hb, minlength=len(names)).astype(np.float64)
        df.append(cnt)
        rows.append(u)
        cols.append(hb + offset)
        vals.append((w / np.maximum(cnt[hb], 1.0) ** p.df_power).astype(np.float32))
        keys += names
        offset += len(names)
    n, h = nodes.height, len(keys)
    inc = sp.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, h)
    ).tocsr()
    inc.sum_duplicates()
    syn = sp.csr_matrix((h, h), dtype=np.float32)
    if p.entities and p.synonym_k > 0 and embed is not None and ent_keys:
        s = _synonyms(ent_keys, embed, p)
        syn = (
            sp.block_diag(
                [s, sp.csr_matrix((h - len(ent_keys), h - len(ent_keys)), dtype=np.float32)],
                format="csr",
            )
            if h > len(ent_keys)
            else s
        )
    return Hubs(
        inc=inc,
        syn=syn.astype(np.float32),
        keys=keys,
        df=np.concatenate(df),
        entity_index={k: i for i, k in enumerate(ent_index)},
    )


def query_seeds(
    queries: pl.DataFrame, hubs: Hubs | None, p: HubParams, qseg: np.ndarray | None = None
) -> pl.DataFrame:
    """(query_idx, hub_idx, weight): the entity hubs of its own segment (``qseg``; default one)
    that a query's text mentions, weights ``1/df**df_power`` normalised to sum 1 per query."""
    schema = {"query_idx": pl.Int64, "hub_idx": pl.Int64, "weight": pl.Float32}
    if hubs is None or not hubs.entity_index:
        return pl.DataFrame(schema=schema)
    kw = _extract_kw(p)
    q, hb = [], []
    qseg = np.zeros(queries.height, np.int64) if qseg is None else qseg
    for i, t in enumerate(queries["text"].to_list()):
        for k in entities.extract(t, **kw):
            j = hubs.entity_index.get((int(qseg[i]), k))
            if j is not None:
                q.append(i)
                hb.append(j)
    if not q:
        return pl.DataFrame(schema=schema)
    w = 1.0 / hubs.df[np.array(hb)] ** p.df_power
    out = pl.DataFrame({"query_idx": q, "hub_idx": hb, "weight": w})
    return out.with_columns(pl.col("weight") / pl.col("weight").sum().over("query_idx")).cast(
        schema
    )


def augment(
    adj: sp.csr_matrix, inhib: sp.csr_matrix, hubs: Hubs, rows: np.ndarray
) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """A scope's (normal, inhibitory) adjacency over ``rows`` with the hubs its units touch appended
    as extra rows/columns; returns those hubs' indices too."""
    inc = hubs.inc[rows]
    cols = np.flatnonzero(np.diff(inc.tocsc().indptr))
    m = inc[:, cols].astype(np.float32)
    s = hubs.syn[cols][:, cols].astype(np.float32)
    big = sp.bmat([[adj.astype(np.float32), m], [m.T, s]], format="csr")
    big.sum_duplicates()
    inh = sp.block_diag(
        [inhib, sp.csr_matrix((len(cols), len(cols)), dtype=inhib.dtype)], format="csr"
    )
    return big, inh, cols


def seed(
    e0: np.ndarray,
    n_units: int,
    qb: np.ndarray,
    cols: np.ndarray,
    qseeds: pl.DataFrame,
    share: float,
) -> None:
    """Give each query of the block its entity hubs, in place: a total energy of ``share / (1 - share)``
    times the query's unit-seed energy, split by the hub weights (queries without unit seeds get
    ``share`` in total). ``share`` is the hubs' part of all seed energy."""
    mass = e0[:n_units].sum(axis=0, dtype=np.float64)  # float64: independent of the block width
    r, c, v = seed_entries(mass, n_units, qb, cols, qseeds, share)
    np.add.at(e0, (r, c), v.astype(e0.dtype))  # onto zeros: each hub's energy, cast once


def seed_entries(
    mass: np.ndarray,
    n_units: int,
    qb: np.ndarray,
    cols: np.ndarray,
    qseeds: pl.DataFrame,
    share: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hub seeds of :func:`seed` as (row, column, float64 energy) entries, given each query's
    unit-seed energy ``mass`` (float64); hub rows follow the ``n_units`` unit rows."""
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if share <= 0 or qseeds.height == 0 or len(cols) == 0:
        return none
    pos = np.full(int(cols.max()) + 1, -1, np.int64)
    pos[cols] = np.arange(len(cols))
    s = qseeds.filter(pl.col("query_idx").is_in(qb.tolist()))
    hub = s["hub_idx"].to_numpy()
    r = np.where(hub < len(pos), pos[np.minimum(hub, len(pos) - 1)], -1)
    ok = r >= 0
    if not ok.any():
        return none
    c = np.searchsorted(qb, s["query_idx"].to_numpy()[ok])
    w = s["weight"].to_numpy()[ok]
    w = w / np.bincount(c, weights=w, minlength=len(qb))[c]  # renormalise over the hubs in scope
    total = np.where(mass > 0, mass * share / max(1e-9, 1.0 - share), share)
    return n_units + r[ok], c, w * total[c]
