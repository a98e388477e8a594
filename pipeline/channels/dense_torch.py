"""Exact inner-product top-k with torch (``dense.index=torch``): the flat scan the GPU runs when
FAISS has no GPU build (the lent H200 image has faiss-cpu only), the same code on the CPU in CI.

Node vectors are moved to the device once, when the index is built; queries go in blocks of
``QUERY_BLOCK``, each scored against ``NODE_BLOCK`` node rows at a time by one matrix product,
``torch.topk`` per block merged into a running top-k (ties by lower node index, exact:
``pipeline.ops.torch_topk``), and ONE host transfer per block of finished query rows. Its hits feed
``dense.exact_top`` like FAISS's, which rescores them by exact per-pair cosines on this device, on
the vectors already resident here (the channel's ``DenseChannel.vectors``: indices in, scores out), in
``ops.pairdot``'s fixed order (a query tied at its cut gets its threshold scan,
``channels.dense_range``, here too), so the channel's answer is bit-identical to ``dense.index=flat`` on
the host, on any device (tests/channels/test_dense_torch.py).
"""

from __future__ import annotations

import numpy as np

from pipeline.ops.torch_topk import merge_rows, to_host, topk_rows

QUERY_BLOCK = 1024  # query rows per block (one host transfer each)
NODE_BLOCK = 1 << 16  # node rows per matrix product (a block's scores: QUERY_BLOCK × NODE_BLOCK)


def to_device(xb, device: str):
    """``xb`` as a float32 torch tensor on ``device``: a tensor already there as it is, a host
    array in one transfer (none on the CPU, where a contiguous float32 array is shared)."""
    import torch

    if isinstance(xb, torch.Tensor):
        return xb.to(device=device, dtype=torch.float32)
    return torch.from_numpy(np.ascontiguousarray(xb, dtype=np.float32)).to(device)


def take_rows(xb, idx):
    """The rows of ``xb`` at ``idx`` (any shape; the result has ``idx``'s shape + ``(dim,)``),
    gathered where ``xb`` lives: numpy indexing on the host, ``index_select`` on a tensor's device
    (only the indices go over). A gather: the same values either way."""
    if isinstance(xb, np.ndarray):
        return xb[idx]
    import torch

    at = torch.tensor(np.asarray(idx, np.int64).reshape(-1), device=xb.device)
    return xb.index_select(0, at).reshape(*np.shape(idx), xb.shape[1])


class TorchIndex:
    """``ntotal`` and ``search`` (what ``dense.search`` uses) over ``xb`` resident on ``device``
    (a host array, moved once, or a tensor already there: ``dense.resident``)."""

    def __init__(self, xb, device: str = "cpu") -> None:
        import torch

        self.device = torch.device(device)
        self.xb = to_device(xb, device)
        self.ntotal = len(xb)

    def search(self, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(D, I): (nq, min(k, n)) float32 inner products and int64 node ids, best first, ties by
        lower id."""
        import torch

        n, nq = self.ntotal, len(xq)
        k = min(k, n)
        D, I = np.zeros((nq, k), np.float32), np.zeros((nq, k), np.int64)
        if k <= 0 or nq == 0:
            return D, I
        xq = np.ascontiguousarray(xq, dtype=np.float32)
        precision = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")  # no TF32: exact_top needs RESCORE_TOL
        try:
            self._scan(xq, k, D, I)
        finally:
            torch.set_float32_matmul_precision(precision)
        return D, I

    def _scan(self, xq: np.ndarray, k: int, D: np.ndarray, I: np.ndarray) -> None:
        import torch

        n, nq = self.ntotal, len(xq)
        with torch.no_grad():
            for a in range(0, nq, QUERY_BLOCK):
                q = torch.from_numpy(xq[a : a + QUERY_BLOCK]).to(self.device)
                v = i = None
                for s in range(0, n, NODE_BLOCK):
                    bv, bi = topk_rows(q @ self.xb[s : s + NODE_BLOCK].T, k)
                    bi = bi + s
                    v, i = (bv, bi) if v is None else merge_rows(v, i, bv, bi, k)
                D[a : a + len(q)], I[a : a + len(q)] = to_host(v, i)
