"""The final score and each query's head of candidates, as array code on the run's device.

Both functions take their arrays' namespace from the arrays (``backend.namespaces``: numpy on the
host, CuPy on a GPU), so the host runs the very functions a GPU run runs:

- :func:`combine`: ``(Σ_t w_t·x_t) · (1 / Σ_t w_t if normalize) · Π_f f`` per row, in float64.
  The weighted terms are added as a balanced tree, halves split at ``⌊n/2⌋`` (for up to eight
  terms the order of polars' ``sum_horizontal``, which computed this score before), and the
  normalisation is a product with the reciprocal (what polars makes of a division by a literal),
  so the bits are those of the polars expression this replaced. A null factor makes its row's
  score null (``valid`` False).
- :func:`head`: the rows whose score reaches their query's ``depth``-th largest, ties at the cut
  included: every row a sort by score could rank within ``depth`` (``stages.select._head``). The
  threshold is a partition of a padded (queries × widest query) block, blocks of consecutive
  queries holding at most ``HEAD_CELLS`` cells (a query wider than that is a block alone).

Both work in blocks whose temporaries stay small: on this 2-core host a fresh 50 MB array costs
about as much again in page faults as the arithmetic on it.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.backend import bincount, namespaces, to_host
from pipeline.ops.topk import int_order

HEAD_CELLS = 1 << 18  # (queries × widest query) cells of one padded block of :func:`head`
COMBINE_ROWS = 1 << 16  # rows per block of :func:`combine` (temporaries that stay in cache)


def tree_sum(parts: list):
    """The arrays of ``parts`` added as a balanced tree (left half: the first ``⌊n/2⌋``)."""
    if len(parts) == 1:
        return parts[0]
    m = len(parts) // 2
    return tree_sum(parts[:m]) + tree_sum(parts[m:])


def combine(terms: list[tuple[float, object]], total: float | None, factors: list) -> tuple:
    """(score, valid): ``terms`` are (weight, float64 array) with nulls read as 0; ``total`` the
    normaliser (None: none); ``factors`` (float64 array, validity array or None), applied in
    order. ``valid`` is None when every row's score is defined. Computed in blocks of
    ``COMBINE_ROWS`` rows into one output (element-wise: the same bits in any block)."""
    xp, _ = namespaces(terms[0][1])
    n = int(terms[0][1].shape[0])
    score = xp.empty(n, dtype=xp.float64)
    for s in range(0, n, COMBINE_ROWS):
        e = min(n, s + COMBINE_ROWS)
        x = tree_sum([w * t[s:e] for w, t in terms])
        if total is not None:
            x = x * (1.0 / total)
        for f, _ok in factors:
            x = x * f[s:e]
        score[s:e] = x
    valid = None
    for _f, ok in factors:
        if ok is not None:
            valid = ok if valid is None else valid & ok
    return score, valid


def head(query, score, depth: int, cells: int | None = None):
    """Indices (ascending) of the rows whose ``score`` reaches the ``depth``-th largest of their
    ``query``'s (all of a query's rows when it has at most ``depth``); None when a score is NaN
    (no order to cut by: the caller keeps every row). ``query`` non-negative integers. Rows are
    taken query block by query block (:func:`_blocks`), so every temporary array is a block's."""
    xp, _ = namespaces(score)
    n = int(score.shape[0])
    if n == 0:
        return xp.arange(0, dtype=xp.int64)
    if score.dtype.kind == "f" and bool(xp.isnan(score).any()):
        return None
    q = query.astype(xp.int64, copy=False)
    grouped = n < 2 or bool((q[1:] >= q[:-1]).all())
    # rows grouped by query: numpy's cheapest stable order (a radix sort for a 16-bit range), or
    # the device's sort
    order = None if grouped else (int_order(q) if xp is np else xp.argsort(q, kind="stable"))
    sq = q if grouped else q[order]  # the query of each row in query order
    lo = int(sq[0])
    counts = to_host(bincount(sq - lo))
    starts = np.cumsum(counts) - counts
    starts_x = xp.asarray(starts)
    floor = -xp.inf if score.dtype.kind == "f" else np.iinfo(score.dtype).min
    kept = []
    for a, z in _blocks(counts, HEAD_CELLS if cells is None else cells):
        s, e, w = int(starts[a]), int(starts[z - 1] + counts[z - 1]), int(counts[a:z].max())
        rows = xp.arange(s, e, dtype=xp.int64) if grouped else order[s:e]
        if w > depth:  # else every row of these queries is kept
            sc = score[rows]
            qb = sq[s:e] - (lo + a)  # the query's place in the block
            block = xp.full((z - a) * w, floor, dtype=score.dtype)
            block[qb * w + (xp.arange(s, e, dtype=xp.int64) - starts_x[a:z][qb])] = sc
            thr = xp.partition(block.reshape(z - a, w), w - depth, axis=1)[:, w - depth]
            rows = rows[sc >= thr[qb]]
        kept.append(rows)
    out = xp.concatenate(kept)
    return out if grouped else xp.sort(out)


def _blocks(counts: np.ndarray, cells: int) -> list[tuple[int, int]]:
    """Consecutive (start, end) runs of queries whose count × widest count stays within ``cells``
    (a query alone may exceed it)."""
    out, a, widest = [], 0, 0
    for i, c in enumerate(counts.tolist()):
        wide = max(widest, c)
        if i > a and wide * (i + 1 - a) > cells:
            out.append((a, i))
            a, wide = i, c
        widest = wide
    if len(counts):
        out.append((a, len(counts)))
    return out
