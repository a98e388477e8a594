"""Fusion of channel scores into one score per (query, node) row, as array code on the run's
device (numpy on the host, CuPy on a GPU: the namespace comes from the arrays).

Inputs are per row: ``query`` (int64), and per channel a :class:`Channel` of float64 value and
1-based rank with their validity (a node the channel did not return has no rank; a node only
another component found may still have a value, a dense cosine). ``weight`` per channel is a
float or a per-query array (indexed by query).

The bits are those of the polars expressions these functions replaced (kept in
``tests/stages/test_fusion.py`` as the reference): per-query maxima and minima ignore NaN (as polars' ``max``), quotients
are true divisions, a weighted term is ``(w · scale[q]) · x``, and the channels' terms are added
as a balanced tree (``scoring.tree_sum``, polars' ``sum_horizontal`` order).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.backend import namespaces, scatter_extreme
from pipeline.ops.scoring import tree_sum


@dataclass
class Channel:
    """One channel's columns: float64 ``value`` (0 where null), its validity ``has_value``, the
    float64 ``rank`` (0 where null) and ``has_rank``."""

    value: object
    has_value: object
    rank: object
    has_rank: object


def per_query(xp, query, x, n: int, how: str):
    """Each query's maximum (``how="max"``) or minimum of ``x`` ignoring NaN (as polars' ``max``
    and ``min``), as an array over query indices ``0..n-1``: ∓inf where a query has no value but
    NaN. (Polars gave NaN there and ordered NaN above every number, so its ``max > 0`` held and
    those rows fused to NaN; here they fuse to 0.)"""
    fill = -xp.inf if how == "max" else xp.inf
    out = xp.full(n, fill, dtype=xp.float64)
    scatter_extreme(out, query, xp.where(xp.isnan(x), fill, x), how)
    return out


def normalised(query, x, how: str, n: int):
    """``x`` (nulls as 0) per query: ``max``: x / max (0 where max ≤ 0); ``minmax``: (x − min) /
    (max − min) (where max = min: 1 if max > 0 else 0); ``none``: x."""
    xp, _ = namespaces(x)
    if how == "none":
        return x
    mx = per_query(xp, query, x, n, "max")[query]
    if how == "max":
        return xp.where(mx > 0, x / xp.where(mx > 0, mx, 1.0), 0.0)
    mn = per_query(xp, query, x, n, "min")[query]
    span = mx - mn
    flat = xp.where(mx > 0, 1.0, 0.0)
    return xp.where(mx > mn, (x - mn) / xp.where(mx > mn, span, 1.0), flat)


def _weight(w, query):
    """A channel's weight per row: the float, or ``w[query]`` for a per-query array."""
    return w if isinstance(w, float) else w[query]


def wsum(query, chans: dict[str, Channel], weights: dict, norms: dict[str, str], n: int):
    """Σ_c w_c · normalised(value_c): the fused score of every row."""
    return tree_sum(
        [
            _weight(weights[c], query) * normalised(query, ch.value, norms[c], n)
            for c, ch in chans.items()
        ]
    )


def rrf(query, chans: dict[str, Channel], weights: dict, k: int, n: int, raw: bool):
    """(fused, valid): Σ_c w_c / (k + rank_c) over the channels that ranked the row. With
    ``raw`` (ReMe's single-branch quirk), a query for which only one channel ranked anything gets
    that channel's raw values (null where the row has none: ``valid`` False)."""
    xp, _ = namespaces(query)
    terms = []
    for c, ch in chans.items():
        t = _weight(weights[c], query) / (k + ch.rank)
        terms.append(xp.where(ch.has_rank, t, 0.0))
    fused, valid = tree_sum(terms), None
    if not raw:
        return fused, valid
    lists = {c: _any(xp, query, ch.has_rank, n) for c, ch in chans.items()}
    for c, ch in chans.items():  # in channel order: a later channel's branch wins, as before
        only = lists[c]
        for o in chans:
            if o != c:
                only = only & ~lists[o]
        row = only[query]
        fused = xp.where(row, ch.value, fused)
        base = xp.ones(query.shape[0], dtype=bool) if valid is None else valid
        valid = xp.where(row, ch.has_value, base)
    return fused, valid


def _any(xp, query, mask, n: int):
    """Per query: whether ``mask`` holds for any of its rows."""
    out = xp.zeros(n, dtype=xp.int32)  # CuPy's scatter_max takes 32-bit integers, not 8
    scatter_extreme(out, query, mask.astype(xp.int32), "max")
    return out > 0


def snake(chans: dict[str, Channel], order: list[str], top_n: int):
    """(fused, kept): OKS's Snake Merge. A row's place is its earliest over the backends of
    ``order`` at position ``pos`` (of n): round = rank − 1, place = round · n + (pos on even rounds,
    n − 1 − pos on odd), for rounds below ``top_n``; fused = 1 / (1 + place); rows with no place
    are not kept."""
    first = next(iter(chans.values())).rank
    xp, _ = namespaces(first)
    n = len(order)
    big = xp.iinfo(xp.int64).max
    place = xp.full(first.shape[0], big, dtype=xp.int64)
    for pos, c in enumerate(order):
        ch = chans[c]
        rnd = ch.rank.astype(xp.int64) - 1
        slot = xp.where(rnd % 2 == 0, pos, n - 1 - pos)
        here = xp.where(ch.has_rank & (rnd < top_n), rnd * n + slot, big)
        place = xp.minimum(place, here)
    kept = place < big
    return 1.0 / (1.0 + place.astype(xp.float64)), kept
