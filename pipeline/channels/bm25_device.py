"""BM25 top-k as a sparse product on a torch device (``lexical.scorer=torch``): the same function
on the CPU in CI and on CUDA.

The corpus's BM25 term weights (``lexical.bm25_matrix``, the block-diagonal per-scope layout of
``segvocab``) go to the device once as the (terms × documents) CSR of ``s.T``; the queries' term
vectors (queries × terms) too. Queries go in blocks whose score block (queries × the documents their
scopes span) holds at most ``BLOCK_SCORES`` entries. A block's scores are the product of its query rows
with ``s.T``, accumulated one query-term position at a time (each pass adds one product to each
(query, document) pair, in the query's column order): the float32 sums of scipy's
``q @ s.T`` (``lexical.score``), bit for bit. ``torch.topk`` with ties by lower document
(``pipeline.ops.torch_topk``) and ONE host transfer per block give ``topk_sparse``'s answer.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from pipeline.core.progress import inner
from pipeline.ops.torch_topk import to_host, topk_rows

BLOCK_SCORES = 1 << 24  # (query, document) scores per block on the device
BLOCK_QUERIES = 4096  # query rows per block at most


def blocks(lo: np.ndarray, hi: np.ndarray, scores: int, most: int) -> list[tuple[int, int]]:
    """Consecutive query ranges [a, b) whose document span (max hi − min lo) × queries is at most
    ``scores`` (one query at least) and which hold at most ``most`` queries."""
    out, a = [], 0
    while a < len(lo):
        b, low, high = a + 1, lo[a], hi[a]
        while b < len(lo) and b - a < most:
            l2, h2 = min(low, lo[b]), max(high, hi[b])
            if (b + 1 - a) * (h2 - l2) > scores:
                break
            low, high, b = l2, h2, b + 1
        out.append((a, b))
        a = b
    return out


def upload(st: sp.csr_matrix, device: str) -> tuple:
    """The (terms × documents) CSR ``st`` (``s.T``: each term's postings, ascending document) on
    ``device`` as torch (indptr, document, weight) tensors: what :func:`topk` reads; a caller that
    scores several query groups against one matrix uploads it once (``candidates.LexicalChannel``)."""
    import torch

    dev = torch.device(device)
    t = lambda a, dt=torch.int64: torch.as_tensor(np.asarray(a)).to(dev, dt)  # noqa: E731
    return t(st.indptr), t(st.indices), t(st.data, torch.float32)


def topk(
    q: sp.csr_matrix,
    s: sp.csr_matrix,
    k: int,
    device: str = "cpu",
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
    resident: tuple | None = None,
) -> tuple[np.ndarray, ...]:
    """``topk_sparse(lexical.score(q, s), k)``: (query, document, score, rank) of each query's ``k``
    best positive scores, ties by lower document, by query then rank. ``lo``/``hi``: the document
    range each query's scope occupies (its scores outside are zero by the layout); default all.
    ``resident``: :func:`upload` of ``s.T`` on ``device`` done earlier (else done here)."""
    import torch

    nq, nd = q.shape[0], s.shape[0]
    lo = np.zeros(nq, np.int64) if lo is None else np.asarray(lo, np.int64)
    hi = np.full(nq, nd, np.int64) if hi is None else np.asarray(hi, np.int64)
    dev = torch.device(device)
    q = q.tocsr()
    q.sort_indices()
    t = lambda a, dt=torch.int64: torch.as_tensor(np.asarray(a)).to(dev, dt)  # noqa: E731
    sp_ptr, sp_doc, sp_val = resident if resident is not None else upload(s.T.tocsr(), device)
    out = []
    parts = blocks(lo, hi, BLOCK_SCORES, BLOCK_QUERIES)
    for a, b in inner(parts, "bm25 device", nq, "query", lambda ab: ab[1] - ab[0]):
        base, width = int(lo[a:b].min()), int(hi[a:b].max() - lo[a:b].min())
        if width <= 0 or k <= 0:
            continue
        ptr = q.indptr[a : b + 1]
        row = np.repeat(np.arange(b - a), np.diff(ptr))
        pos = np.arange(ptr[-1] - ptr[0]) - (ptr[:-1] - ptr[0])[row]
        terms, vals = q.indices[ptr[0] : ptr[-1]], q.data[ptr[0] : ptr[-1]]
        acc = torch.zeros((b - a) * width, dtype=torch.float32, device=dev)
        for j in range(int(pos.max(initial=-1)) + 1):  # one addend per (query, document) a pass
            m = pos == j
            r, tm, v = t(row[m]), t(terms[m]), t(vals[m], torch.float32)
            start, count = sp_ptr[tm], sp_ptr[tm + 1] - sp_ptr[tm]
            owner = torch.repeat_interleave(torch.arange(len(tm), device=dev), count)
            first = torch.cumsum(count, 0) - count
            at = start[owner] + torch.arange(len(owner), device=dev) - first[owner]
            target = r[owner] * width + (sp_doc[at] - base)
            acc.index_add_(0, target, v[owner] * sp_val[at])
        acc = acc.view(b - a, width)
        acc = torch.where(acc > 0, acc, torch.full_like(acc, -torch.inf))  # topk_sparse: > 0 only
        val, col = to_host(*topk_rows(acc, k))
        ok = np.isfinite(val)
        qrow = np.broadcast_to(np.arange(a, b)[:, None], ok.shape)[ok]
        rank = np.broadcast_to(np.arange(1, val.shape[1] + 1, dtype=np.int32), ok.shape)[ok]
        out.append((qrow.astype(np.int64), col[ok] + base, val[ok], rank))
    if not out:
        e = np.zeros(0, np.int64)
        return e, e, np.zeros(0, np.float32), np.zeros(0, np.int32)
    return tuple(np.concatenate(x) for x in zip(*out))


SCORERS = ("auto", "scipy", "torch")


def scorer(name: str, device: str) -> str:
    """``lexical.scorer``: ``scipy`` (the host's sparse product) or ``torch`` (:func:`topk` on
    ``device``); ``auto`` is ``torch`` on cuda and ``scipy`` on cpu. Both give the same bits."""
    from pipeline.contract.errors import require_one_of

    require_one_of("lexical.scorer", name, SCORERS)
    return "torch" if name == "torch" or (name == "auto" and device == "cuda") else "scipy"
