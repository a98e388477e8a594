"""The stored entries of an (N, B) matrix as (query, node, value) triplets and back, for PEDSA and PPR.

A query is a column of the matrix; triplets are grouped by query. Every helper takes ``xp``/``sp``
(numpy + scipy.sparse, or cupy + cupyx.scipy.sparse) so one code path serves the CPU and the GPU.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.backend import bincount


def is_sparse(x) -> bool:
    """True for a scipy or cupyx sparse matrix, False for a dense array."""
    return hasattr(x, "tocsr")


def segment_ids(xp, indptr, total: int):
    """Row of every stored entry of a CSR structure: ``repeat(arange(rows), diff(indptr))``."""
    dt = xp.int32 if total < 2**31 else xp.int64
    if xp is np:  # numpy's repeat: ~30x the bincount and cumsum below on millions of entries
        return np.repeat(np.arange(len(indptr) - 1, dtype=dt), np.diff(indptr))
    # cupy.repeat takes no array of counts: count the rows starting at each entry and add them up
    # (one row gives an empty ``indptr[1:-1]``)
    starts = bincount(indptr[1:-1], minlength=total + 1)[:total]
    return xp.cumsum(starts, dtype=dt)


def per_entry(xp, row_values, indptr, total: int):
    """``row_values`` of each stored entry's row of a CSR structure (``total`` entries)."""
    if xp is np:  # one repeat, no row ids to gather through
        return np.repeat(row_values, np.diff(indptr))
    return row_values[segment_ids(xp, indptr, total)]


def spans(xp, lo, hi):
    """The positions ``lo[j] .. hi[j] - 1`` of every j, concatenated (ranges of a sorted index):
    :func:`segment_ids` over the ranges' lengths, plus each entry's offset in its range."""
    indptr = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(hi - lo)])
    total = int(indptr[-1])
    seg = segment_ids(xp, indptr, total)
    return lo[seg] + xp.arange(total) - indptr[seg]


def triplets(xp, sp, x):
    """(query, node, value) of the nonzeros of an (N, B) dense or sparse matrix, sorted by (query, node)."""
    if is_sparse(x):
        t = sp.csr_matrix(x.T)
        t.sum_duplicates()
        q, i, v = segment_ids(xp, t.indptr, t.nnz), t.indices, t.data
        nz = v != 0
        return q[nz], i[nz], v[nz]
    q, i = xp.nonzero(x.T)
    return q, i, x[i, q]


def rows_csr(sp, xp, q, i, v, shape):
    """CSR matrix from entries already grouped by row ``q`` (ascending)."""
    indptr = xp.searchsorted(q, xp.arange(shape[0] + 1), side="left")
    return sp.csr_matrix((v, i, indptr), shape=shape)
