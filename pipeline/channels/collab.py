"""The ``collab`` channel (OKS's designed recall-layer backend beside BM25; spec §3.e): pages
co-used with a query's first-layer hits, from the injection log, that the first layer did not find.

Per query: its first-layer hit pages are the pages of its best ``seeds`` candidates of the other
channels (by their best rank); a page's slug is the file stem of ``doc_id`` (else ``node_id``), as
OKS names pages. The co-use similarity (``sim``: ItemCF or Swing, ``pipeline.ops.collab``) is
counted over ``basket`` = agent, session or single injection, from the log rows of the query's
team only (``team`` on queries and log rows; absent = one team), all teams in one sparse product.
``score(j) = Σ_h sim(h, j)`` over the hit pages h; j must be a page of the query's scope and not a
hit page; it is given to the page's first node in node order; the best ``candidates`` are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ClassVar

import numpy as np
import polars as pl

from pipeline.contract.errors import DataError, require_one_of
from pipeline.core.stage import Params
from pipeline.ops import collab

BASKETS = {"agent": ["agent_id"], "session": ["session_id"], "injection": ["session_id", "turn"]}


@dataclass(frozen=True)
class CollabParams(Params):
    """Collab channel settings: similarity, basket, Swing constants, hit pages read, list size."""

    GROUP: ClassVar[str] = "collab"
    OPTION: ClassVar[str] = "default"
    sim: str  # itemcf | swing
    basket: str  # agent | session | injection
    alpha: float  # Swing: 1 / (alpha + overlap)
    user_weight: bool  # Swing: w_u = 1 / sqrt(|I_u|)
    seeds: int  # first-layer hit pages per query
    candidates: int  # collab candidates per query

    def __post_init__(self) -> None:
        require_one_of("collab.sim", self.sim, collab.SIMILARITIES)
        require_one_of("collab.basket", self.basket, BASKETS)


def slugs(nodes: pl.DataFrame) -> list[str]:
    """Each node's page slug: the file stem of ``doc_id``, else of ``node_id``."""
    docs = nodes["doc_id"].to_list() if "doc_id" in nodes.columns else [None] * nodes.height
    return [PurePosixPath(d or n).stem for d, n in zip(docs, nodes["node_id"].to_list())]


def _team(df: pl.DataFrame) -> np.ndarray:
    if "team" not in df.columns:
        return np.array([""] * df.height, dtype=object)
    return df["team"].cast(pl.String).fill_null("").to_numpy().astype(object)


def similarity(log: pl.DataFrame, p: CollabParams) -> tuple[object, dict]:
    """(items × items similarity, {(team, slug): item code}) of the log, every team at once."""
    cols = BASKETS[p.basket]
    missing = [c for c in [*cols, "slugs"] if c not in log.columns]
    if missing:
        raise DataError(
            "injection log (Dataset.tables inject_log / access_log)",
            f"no column {missing[0]!r} (collab.basket={p.basket} reads {cols} and slugs)",
            "add the column, or choose another collab.basket (agent | session | injection)",
        )
    rows = log.select(
        team=pl.Series(_team(log), dtype=pl.String),
        key=pl.concat_str(
            [pl.col(c).cast(pl.String).fill_null("") for c in cols], separator="\x1f"
        ),
        slug="slugs",
    ).explode("slug")
    rows = rows.drop_nulls("slug")
    team, key, slug = (rows[c].to_numpy().astype(str) for c in ("team", "key", "slug"))
    b, nb = collab.codes(team, key)
    i, ni = collab.codes(team, slug)
    r = collab.incidence(b, i, (nb, ni))
    fn = collab.SIMILARITIES[p.sim]
    sim = fn(r, alpha=p.alpha, user_weight=p.user_weight) if p.sim == "swing" else fn(r)
    items = dict(zip(zip(team.tolist(), slug.tolist()), i.tolist()))
    return sim, items


def _seed_pages(first: pl.DataFrame, slug: np.ndarray, seeds: int) -> pl.DataFrame:
    """Each query's first ``seeds`` distinct pages among the other channels' candidates, by their
    best rank (ties by node)."""
    ranks = [c for c in first.columns if c.endswith("_rank")]
    return (
        first.with_columns(_best=pl.min_horizontal(ranks))
        .with_columns(_slug=pl.Series(slug[first["node_idx"].to_numpy()], dtype=pl.String))
        .sort("query_idx", "_best", "node_idx")
        .unique(["query_idx", "_slug"], keep="first", maintain_order=True)
        .filter(pl.int_range(pl.len()).over("query_idx") < seeds)
    )


def _scope_pages(parts: list, slug: np.ndarray, nq: int) -> tuple[np.ndarray, pl.DataFrame]:
    """The scope of each query, and the pages each scope may see: (scope, slug) → its first node,
    all scopes at once."""
    part_of_q = np.full(nq, -1, dtype=np.int64)
    for k, (_key, _rows, qs) in enumerate(parts):
        part_of_q[qs] = k
    pages = pl.DataFrame(
        {
            "_part": np.concatenate([np.full(len(r), k) for k, (_, r, _q) in enumerate(parts)]),
            "node_idx": np.concatenate([np.asarray(r) for _, r, _q in parts]).astype(np.int64),
        }
    )
    pages = (
        pages.with_columns(_slug=pl.Series(slug[pages["node_idx"].to_numpy()], dtype=pl.String))
        .group_by("_part", "_slug")
        .agg(pl.col("node_idx").min())
    )
    return part_of_q, pages


def candidates(
    first: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    parts: list,
    log: pl.DataFrame | None,
    p: CollabParams,
) -> pl.DataFrame:
    """(query_idx, node_idx, collab_rank, collab) of the collab channel; ``first`` holds the other
    channels' candidates with their ``*_rank`` columns; ``parts`` the scope groups."""
    schema = {
        "query_idx": pl.Int64,
        "node_idx": pl.Int64,
        "collab_rank": pl.Int32,
        "collab": pl.Float32,
    }
    if log is None or log.height == 0 or first.height == 0:
        return pl.DataFrame(schema=schema)
    sim, items = similarity(log, p)
    slug = np.array(slugs(nodes), dtype=object)
    qteam = _team(queries)
    hits = _seed_pages(first, slug, p.seeds)
    hq, hs = hits["query_idx"].to_numpy(), hits["_slug"].to_list()
    code = np.array([items.get((qteam[q], s), -1) for q, s in zip(hq.tolist(), hs)], np.int64)
    keep = code >= 0
    nq = queries.height
    h = collab.incidence(hq[keep], code[keep], (nq, sim.shape[0]))
    score = collab.coused(h, sim).tocoo()
    inv_slug = np.empty(sim.shape[0], dtype=object)
    for (_t, s_), c in items.items():
        inv_slug[c] = s_
    got = pl.DataFrame(
        {
            "query_idx": score.row.astype(np.int64),
            "_slug": pl.Series(inv_slug[score.col], dtype=pl.String),
            "collab": score.data,
        }
    )
    part_of_q, pages = _scope_pages(parts, slug, nq)
    df = (
        got.with_columns(_part=pl.Series(part_of_q[got["query_idx"].to_numpy()]))
        .join(pages, on=["_part", "_slug"], how="inner")
        .join(hits.select("query_idx", "_slug"), on=["query_idx", "_slug"], how="anti")
        .sort(["query_idx", "collab", "node_idx"], descending=[False, True, False])
        .with_columns(collab_rank=pl.int_range(1, pl.len() + 1).over("query_idx"))
    )
    return df.filter(pl.col("collab_rank") <= p.candidates).select(list(schema)).cast(schema)
