"""Threshold (range) scan of the dense channel: every (query, node) pair whose inner product
reaches the query's own threshold, by blocked matrix products where the node vectors live.

``dense.exact_top`` asks it for the nodes that may tie with a query's k-th exact cosine (those
within ``RESCORE_TOL`` of it), so that only those are rescored exactly, not the whole scope. The
products' bits may depend on the block and the BLAS (a float32 GEMM, within ``RESCORE_TOL`` of the
exact cosine for unit vectors): the scan only chooses which pairs are rescored, and a pair scored
a hair above or below its threshold by one product or another is rescored or is far from the cut.

On the host (``xb`` a numpy array or memmap), node rows go in blocks of at most ``RANGE_SCORES``
query × node scores; on a torch tensor's device (``dense.resident``), the same blocks by ``@`` in
full float32 (no TF32), the pairs gathered there and brought to the host in ONE transfer.
"""

from __future__ import annotations

import numpy as np

RANGE_SCORES = 1 << 24  # query × node scores per block of a threshold scan (64 MiB of float32)


def _step(nq: int, n: int, scores: int) -> int:
    """Node rows per block: ``scores`` scores for ``nq`` queries, at least one row."""
    return max(1, min(n, scores // max(1, nq)))


def within(xq, xb, thr: np.ndarray, scores: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(query row, node) int64 of every pair with ``xq[row] · xb[node] >= thr[row]``, by row then
    node. ``xq``: (nq, d) host array; ``xb``: (n, d) numpy array (a memmap is read block by block)
    or torch tensor on any device; ``thr``: (nq,) float32."""
    nq, n = len(xq), len(xb)
    if nq == 0 or n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    step = _step(nq, n, RANGE_SCORES if scores is None else scores)
    xq = np.ascontiguousarray(xq, dtype=np.float32)
    thr = np.asarray(thr, np.float32)
    if isinstance(xb, np.ndarray):
        return _host(xq, xb, thr, step)
    return _device(xq, xb, thr, step)


def _host(xq, xb, thr, step: int) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = [], []
    for s in range(0, len(xb), step):
        block = np.asarray(xb[s : s + step], dtype=np.float32)
        # flat positions, then (row, column): 2-d nonzero is ~10x slower on a sparse mask
        at = np.flatnonzero((xq @ block.T) >= thr[:, None])
        rows.append(at // len(block))
        cols.append(at % len(block) + s)
    return _by_row(np.concatenate(rows), np.concatenate(cols))


def _by_row(r: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of several node blocks ordered by (row, node): a stable sort by row keeps each
    row's nodes ascending (the blocks come in node order)."""
    order = np.argsort(r, kind="stable")
    return r[order].astype(np.int64), c[order].astype(np.int64)


def _device(xq, xb, thr, step: int) -> tuple[np.ndarray, np.ndarray]:
    import torch

    dev = xb.device
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # TF32 errs by ~1e-3, beyond RESCORE_TOL
    try:
        with torch.no_grad():
            q = torch.from_numpy(xq).to(dev)
            t = torch.from_numpy(thr).to(dev)[:, None]
            found = []
            for s in range(0, len(xb), step):
                hit = torch.nonzero((q @ xb[s : s + step].to(torch.float32).T) >= t)
                hit[:, 1] += s
                found.append(hit)
            pairs = torch.cat(found).cpu().numpy()  # the one host transfer
    finally:
        torch.set_float32_matmul_precision(precision)
    return _by_row(pairs[:, 0], pairs[:, 1])
