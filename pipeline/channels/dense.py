"""Dense channel: exact (flat) or approximate (IVF, HNSW) inner-product search with FAISS.

Embeddings are L2-normalised, so inner product = cosine. A GPU index is used when ``device`` is
``cuda`` and faiss reports GPUs; otherwise the CPU index (the same results for ``flat``).
"""

from __future__ import annotations

import logging

import numpy as np

from pipeline.channels import dense_range
from pipeline.contract.errors import require_one_of
from pipeline.core import backend
from pipeline.ops import pairdot
from pipeline.ops.topk import topk_long

log = logging.getLogger(__name__)
INDEXES = ("flat", "ivf", "hnsw", "blocked", "torch")
EXACT = ("flat", "blocked", "torch")  # indexes whose hits exact_top may complete by a full rescan


def build_index(
    xb: np.ndarray,
    kind: str = "flat",
    *,
    nlist: int = 1024,
    nprobe: int = 16,
    hnsw_m: int = 32,
    ef_search: int = 128,
    seed: int = 13,
    device: str = "cpu",
    block: int = 65536,
):
    """xb: (n, d) float32 → a FAISS index over it (inner product); ``blocked``: an exact scan of
    ``xb`` (a memmap is fine) in blocks of ``block`` rows with a running top-k (``channels.blocked``);
    ``torch``: an exact scan by matrix product + topk on ``device`` (``channels.dense_torch``), also
    what ``flat`` runs on ``cuda`` when FAISS has no GPU (a fallback note says so)."""
    faiss = backend.import_faiss()
    require_one_of("dense.index", kind, INDEXES)
    if kind == "blocked":
        from pipeline.channels.blocked import BlockedIndex

        return BlockedIndex(xb, block)
    if runs_in_torch(kind, device):
        if kind == "flat":
            backend.fallback(
                "faiss reports no GPU; dense.index=flat runs as dense.index=torch "
                "(blocked matrix product + topk) on cuda"
            )
        from pipeline.channels.dense_torch import TorchIndex

        return TorchIndex(xb, device)
    n, d = xb.shape
    xb = np.ascontiguousarray(xb, dtype=np.float32)
    if kind == "flat" or (kind == "ivf" and n < 4 * 39):
        index = faiss.IndexFlatIP(d)
    elif kind == "ivf":
        nl = max(1, min(nlist, n // 39))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nl, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        index.train(xb)
        index.nprobe = min(nprobe, nl)
    else:
        index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efSearch = ef_search
    if device == "cuda" and backend.faiss_gpus() > 0 and kind != "hnsw":
        index = faiss.index_cpu_to_all_gpus(index)
    elif device == "cuda":
        backend.fallback(f"faiss reports no GPU; dense search on cpu ({backend.faiss_summary()})")
    index.add(xb)
    return index


def runs_in_torch(kind: str, device: str) -> bool:
    """Whether :func:`build_index` makes a torch index (``channels.dense_torch``) for ``kind`` on
    ``device``: ``dense.index=torch``, or ``flat`` on cuda when FAISS has no GPU build."""
    return kind == "torch" or (kind == "flat" and device == "cuda" and backend.faiss_gpus() == 0)


def resident(ctx, index: str):
    """The node vectors a group's pair scores and gathers read: ``ctx.xb`` on the host, or, when
    the dense channel's ``index`` (``dense.index``) scans in torch (:func:`runs_in_torch`), its copy resident on the run's
    device, made once: the run's one copy when the group holds the whole corpus in order (the
    1M-node case), else the group's own. Pair scores (``ops.pairdot``: the same bits on any
    device) and DPP's gathers then run where the vectors are, and only indices go over."""
    xb, state = ctx.xb, ctx.run
    if ctx.xb_resident is not None:
        return ctx.xb_resident
    if xb is None or not runs_in_torch(index, state.device):
        return xb
    from pipeline.channels.dense_torch import to_device

    make = lambda: to_device(xb, state.device)  # noqa: E731
    ctx.xb_resident = state.const("xb_resident", make) if xb is state.xb else make()
    return ctx.xb_resident


def search(index, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """xq: (nq, d) → (D, I): (nq, k) scores and ids (−1 where fewer than k items)."""
    k = min(k, index.ntotal)
    if k <= 0 or len(xq) == 0:
        return np.zeros((len(xq), 0), np.float32), np.zeros((len(xq), 0), np.int64)
    xq = np.ascontiguousarray(xq, dtype=np.float32)
    if not _tiny_flat(index, len(xq)):
        return index.search(xq, k)
    faiss = backend.import_faiss()
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # OpenMP start-up costs ~100x the arithmetic of a tiny scan
    try:
        return index.search(xq, k)
    finally:
        faiss.omp_set_num_threads(threads)


RESCORE_EXTRA = 8  # hits searched beyond the cut, rescored exactly (:func:`exact_top`)
RESCORE_TOL = 1e-4  # |search or range-scan product − exact cosine| bound, unit vectors (float32)
TINY = 1 << 16  # query × item pairs up to which a flat CPU scan runs on one thread


def _tiny_flat(index, nq: int) -> bool:
    """A small CPU flat scan on FAISS's per-query path (below its BLAS threshold): each query is
    computed by one thread whatever the thread count, so one thread gives the same bits, faster."""
    faiss = backend.import_faiss()
    return (
        type(index) is faiss.IndexFlatIP
        and nq * index.ntotal <= TINY
        and nq < faiss.cvar.distance_compute_blas_threshold
    )


def pair_scores(xq, xb, qi: np.ndarray, di: np.ndarray, block: int | None = None) -> np.ndarray:
    """Cosine of each (query qi[j], item di[j]) pair: :func:`ops.pairdot.pair_dots`, one fixed
    order of float32 operations, so a pair's bits are its own whatever the block, the thread or the
    device (``xb`` a numpy array, or a torch index's resident vectors)."""
    return pairdot.pair_dots(xq, xb, qi, di, block)


def exact_top(xq, xb, D, I, k: int, exact: bool = True):
    """Each query's ``k`` best of its search hits ``(D, I)`` by its exact cosine
    (:func:`pair_scores`), ties by lower item: (query row, item, cosine), by query then rank.

    A search's scores carry bits that depend on the query's place in the scan (FAISS's BLAS path
    tiles queries × items in a GEMM), so an item tied at the k-th score could be kept or dropped
    depending on the other queries of the batch. Ask for more than ``k`` hits; an ``exact`` index
    (flat, blocked, torch) whose last hit is within ``RESCORE_TOL`` of the k-th exact score may
    have missed an item tied with it. For those queries a threshold scan
    (``channels.dense_range``) finds every item whose product is within ``RESCORE_TOL`` of that
    k-th score (any item whose exact cosine reaches it), and only those are rescored: the answer is
    each query's k best of its whole scope by (exact cosine desc, item asc), whatever the batch.
    """
    ok = I >= 0
    qi = np.broadcast_to(np.arange(len(I))[:, None], I.shape)[ok]
    ni = I[ok].astype(np.int64)
    s = pair_scores(xq, xb, qi, ni)
    if exact and I.shape[1] > k and I.shape[1] < len(xb):
        grid = np.full(I.shape, -np.inf, np.float32)
        grid[ok] = s
        kth = -np.partition(-grid, k - 1, axis=1)[:, k - 1]
        redo = np.flatnonzero(ok[:, -1] & (D[:, -1] >= kth - RESCORE_TOL))
        if redo.size:
            qi, ni, s = _rescanned(xq, xb, qi, ni, s, redo, kth[redo] - RESCORE_TOL)
    qi, ni, s, _rank = topk_long(qi.astype(np.int64), ni, s, k)
    return qi, ni, s


def _rescanned(xq, xb, qi, ni, s, redo: np.ndarray, thr: np.ndarray):
    """The hits ``(qi, ni, s)`` with those of the queries ``redo`` replaced by every item whose
    product reaches ``thr`` (``dense_range.within``), each with its exact cosine: a hit's own,
    :func:`pair_scores` for the others."""
    rq, rn = dense_range.within(xq[redo], xb, thr)
    rq = redo[rq]
    mine = np.isin(qi, redo)
    n = max(len(xb), 1)
    hit_key, hit_s = qi[mine].astype(np.int64) * n + ni[mine], s[mine]
    order = np.argsort(hit_key)
    hit_key, hit_s = hit_key[order], hit_s[order]
    key = rq * n + rn
    at = np.minimum(np.searchsorted(hit_key, key), max(len(hit_key) - 1, 0))
    known = hit_key[at] == key if len(hit_key) else np.zeros(len(key), bool)
    rs = np.empty(len(key), np.float32)
    rs[known] = hit_s[at[known]]
    rs[~known] = pair_scores(xq, xb, rq[~known], rn[~known])
    keep = ~mine
    return np.r_[qi[keep], rq], np.r_[ni[keep], rn], np.r_[s[keep], rs]
