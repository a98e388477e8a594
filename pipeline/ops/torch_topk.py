"""Row top-k on a torch device (CPU in CI, CUDA on a GPU: the same functions), ties by lower index.

``torch.topk`` picks arbitrarily among entries tied at its cut; :func:`topk_rows` asks for one more
than ``k``, orders what it got by (score desc, index asc) and sorts in full only the rows whose tie
crosses the cut, so the answer is the exact rule of ``pipeline.ops.topk.topk_long``.
"""

from __future__ import annotations

import numpy as np


def order_rows(v, i):
    """(v, i) of each row reordered by score descending, then index ascending."""
    import torch

    o = torch.argsort(i, dim=1, stable=True)
    v, i = v.gather(1, o), i.gather(1, o)
    o = torch.argsort(-v, dim=1, stable=True)
    return v.gather(1, o), i.gather(1, o)


def topk_rows(s, k: int):
    """(values, column indices) of the ``min(k, n)`` best of each row of ``s`` (b, n), by score
    descending then column ascending (exact, whatever ``torch.topk`` does with ties)."""
    import torch

    n = s.shape[1]
    k = min(k, n)
    kk = min(k + 1, n)
    v, i = torch.topk(s, kk, dim=1)
    v, i = order_rows(v, i)
    if kk > k and k > 0:
        tie = (v[:, k - 1] == v[:, k]) & torch.isfinite(v[:, k - 1])
        rows = torch.nonzero(tie).flatten()
        if rows.numel():  # a tie crosses the cut: a stable full sort of those rows (index order)
            o = torch.argsort(-s[rows], dim=1, stable=True)[:, :kk]
            v[rows], i[rows] = s[rows].gather(1, o), o
    return v[:, :k], i[:, :k]


def merge_rows(v1, i1, v2, i2, k: int):
    """The ``k`` best of two row-wise lists, each ordered (score desc, index asc), where every index
    of ``i1`` is below every index of ``i2``: a stable sort by score keeps ``i1``'s ties first."""
    import torch

    v, i = torch.cat([v1, v2], 1), torch.cat([i1, i2], 1)
    o = torch.argsort(-v, dim=1, stable=True)[:, :k]
    return v.gather(1, o), i.gather(1, o)


def to_host(v, i) -> tuple[np.ndarray, np.ndarray]:
    """float32 values and int64 indices of a block in ONE device→host transfer (the values' bits
    ride in an int64 tensor next to the indices)."""
    import torch

    k = i.shape[1]
    both = torch.cat([i.to(torch.int64), v.to(torch.float32).view(torch.int32).to(torch.int64)], 1)
    h = both.cpu().numpy()
    return h[:, k:].astype(np.int32).view(np.float32), h[:, :k]
