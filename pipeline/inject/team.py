"""OKS's team injection layer (``preset=oks_team``): collaborative boosts and MMR, on pages the
recall layer already found (OKS invariant A8: the recall layer finds, the injection layer orders).

OKS designs these (spec ``reference-algorithms.md`` §3.e) without formulas or constants in its
repository (open-agent-power/open-knowledge-studio@6a281b47); the ones used here:

- Collaborative boost: a query by agent ``a`` of team ``t`` and a candidate page ``i`` get
  ``itemcf = Σ_{x ∈ I_a} sim(x, i)`` ("agents that injected x also injected i", ItemCF over the
  team's agents) and ``usercf = Σ_b usim(a, b)·[b injected i]`` (agents whose injections resemble
  a's), both from the log rows of team ``t`` only (``pipeline.ops.collab``); the order key is
  ``boost = base × (1 + beta_item·itemcf + beta_user·usercf)``.
- MMR: greedy ``argmax_d boost(d) − λ·max_{s ∈ selected} sim(d, s)`` with
  ``sim = [area(d) = area(s)] + [type(d) = type(s)]`` (0, 1 or 2), batched over all queries.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.ops import collab


def mmr_order(boost: np.ndarray, area: np.ndarray, type_: np.ndarray, lam: float) -> np.ndarray:
    """MMR order of each query's pool: ``boost`` (nq, P) with ``-inf`` for padding, ``area`` and
    ``type_`` (nq, P) integer codes (−1 = missing, never equal). Returns (nq, P) pool positions in
    pick order (padding last); ties go to the lower position."""
    nq, p = boost.shape
    out = np.full((nq, p), -1, dtype=np.int64)
    taken = ~np.isfinite(boost)
    maxsim = np.zeros((nq, p))
    rows = np.arange(nq)
    for step in range(p):
        gain = np.where(taken, -np.inf, boost - lam * (maxsim if step else 0.0))
        best = np.argmax(gain, axis=1)
        live = np.isfinite(gain[rows, best])
        out[rows[live], step] = best[live]
        taken[rows[live], best[live]] = True
        a, t = area[rows, best][:, None], type_[rows, best][:, None]
        sim = ((area == a) & (a >= 0)).astype(float) + ((type_ == t) & (t >= 0)).astype(float)
        maxsim = np.where(live[:, None], np.maximum(maxsim, sim), maxsim)
    return out


def _codes(values: list) -> np.ndarray:
    """Integer codes of strings, −1 for a missing (None or empty) value."""
    table: dict = {}
    return np.array([table.setdefault(v, len(table)) if v else -1 for v in values], np.int64)


def mmr_rows(rows: pl.DataFrame, key: str, lam: float) -> pl.DataFrame:
    """``rows`` (query_id, ``key``, area?, type?) reordered per query by MMR over ``key``."""
    if rows.height == 0:
        return rows
    rows = rows.with_columns(
        _q=pl.col("query_id").rank("dense") - 1, _p=pl.int_range(pl.len()).over("query_id")
    )
    nq, width = int(rows["_q"].max()) + 1, int(rows["_p"].max()) + 1
    q, pos = rows["_q"].to_numpy(), rows["_p"].to_numpy()
    grids = []
    for col, fill in ((key, -np.inf), ("area", -1), ("type", -1)):
        g = np.full((nq, width), fill, dtype=float if col == key else np.int64)
        vals = rows[col].to_list() if col in rows.columns else [None] * rows.height
        g[q, pos] = np.asarray(vals, dtype=float) if col == key else _codes(vals)
        grids.append(g)
    order = mmr_order(*grids, lam)
    place = np.empty((nq, width), dtype=np.int64)
    place[np.arange(nq)[:, None], np.where(order >= 0, order, 0)] = np.arange(width)
    return rows.with_columns(_m=pl.Series(place[q, pos])).sort("_q", "_m").drop("_q", "_p", "_m")


def _team(df: pl.DataFrame) -> pl.Series:
    return df["team"].fill_null("") if "team" in df.columns else pl.Series([""] * df.height)


def cf_boosts(
    log: pl.DataFrame, rows: pl.DataFrame, queries: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """(itemcf, usercf) of each row (query_id, slug): the boosts of the row's page for the query's
    agent, from the log rows (agent_id, slugs, team?) of the query's team only."""
    who = pl.col("agent_id").fill_null("") if "agent_id" in log.columns else pl.lit("")
    pairs = log.select(team=_team(log), agent=who, slug="slugs")
    pairs = pairs.explode("slug").drop_nulls("slug")
    agent = pl.col("agent_id").fill_null("") if "agent_id" in queries.columns else pl.lit("")
    q = queries.select("query_id", team=_team(queries), agent=agent)
    r = rows.select("query_id", "slug").join(q, on="query_id", how="left", maintain_order="left")
    teams = np.concatenate([pairs["team"].to_numpy(), r["team"].to_numpy()]).astype(str)
    agents = np.concatenate([pairs["agent"].to_numpy(), r["agent"].to_numpy()]).astype(str)
    slugs = np.concatenate([pairs["slug"].to_numpy(), r["slug"].to_numpy()]).astype(str)
    b, nb = collab.codes(teams, agents)
    i, ni = collab.codes(teams, slugs)
    n = pairs.height
    m = collab.incidence(b[:n], i[:n], (nb, ni))
    ib = collab.item_boost(m, collab.itemcf(m))
    ub = collab.user_boost(m, collab.usercf(m))
    rb, ri = b[n:], i[n:]
    return np.asarray(ib[rb, ri]).ravel(), np.asarray(ub[rb, ri]).ravel()
