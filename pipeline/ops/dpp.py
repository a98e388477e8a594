"""Batched diversity selection: greedy DPP MAP (BME semantics) and MMR, in torch.

One code path for CPU and CUDA: the device comes from the inputs. Queries are vectorised over the batch
dimension; only the k greedy steps are a Python loop. Kernel rows are built lazily from the embeddings
(one (B, P) row per step) above GRAM_MAX_P items; below it a (B, P, P) cosine matrix is cheaper.

The two paths, and a batch of one on the lazy path (torch sends it to another kernel), give other
float bits for the same query. A caller that wants a query's bits to depend on its own pool only
pads each query to :func:`pool_width` of its own size (which also fixes its path) and batches at
least :data:`MIN_ROWS` rows (``pipeline.stages.select``; ``tests/stages/test_select.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Q_FLOOR = 1e-10  # q_i = max(score_i, Q_FLOOR) ** quality_weight
D2_JITTER = 1e-8  # d_i² starts at q_i² + D2_JITTER
D2_STOP = 1e-10  # below this d_j*² the Cholesky row is not computed (the pick still happens)
GRAM_MAX_P = 256  # build the full (B, P, P) cosine matrix up to this P; lazy rows above
WIDTH_STEP = 32  # pool_width rounds a pool up to a multiple of this (of GRAM_MAX_P above it)
MIN_ROWS = 2  # a batch of one row takes another bmm kernel on the lazy path: pad to at least this


def pool_width(n: int) -> int:
    """The padded width a pool of ``n`` items runs at: a function of ``n`` alone, on the Gram path
    exactly when ``n ≤ GRAM_MAX_P`` (a multiple of WIDTH_STEP there, of GRAM_MAX_P above)."""
    step = WIDTH_STEP if n <= GRAM_MAX_P else GRAM_MAX_P
    return max(1, -(-n // step)) * step


def _check(scores: Tensor, emb: Tensor, k: int, valid: Tensor | None, name: str) -> Tensor:
    """Validate shapes/devices at the boundary; return the (B, P) bool mask (all True when None)."""
    if not isinstance(scores, Tensor) or scores.ndim != 2:
        raise ValueError(
            f"{name} must be a (B, P) tensor; got {getattr(scores, 'shape', type(scores))}"
        )
    if not isinstance(emb, Tensor) or emb.ndim != 3 or tuple(emb.shape[:2]) != tuple(scores.shape):
        raise ValueError(
            f"emb must be a (B, P, d) tensor matching {name} {tuple(scores.shape)}; "
            f"got {getattr(emb, 'shape', type(emb))}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k={k!r}; pass a non-negative int")
    if emb.device != scores.device:
        raise ValueError(
            f"emb is on {emb.device} but {name} on {scores.device}; move both to one device"
        )
    if valid is None:
        return torch.ones(scores.shape, dtype=torch.bool, device=scores.device)
    if (
        not isinstance(valid, Tensor)
        or valid.dtype != torch.bool
        or tuple(valid.shape) != tuple(scores.shape)
        or valid.device != scores.device
    ):
        raise ValueError(
            f"valid must be a bool tensor of shape {tuple(scores.shape)} on {scores.device}; "
            f"got {type(valid).__name__} {getattr(valid, 'dtype', '')} {getattr(valid, 'shape', '')}"
        )
    return valid


def unit_rows(emb: Tensor, valid: Tensor, dtype: torch.dtype) -> Tensor:
    """L2-normalise rows of ``emb: (B, P, d)``; zero vectors and invalid rows become zero."""
    e = torch.where(valid[..., None], emb.to(dtype), 0.0)
    norm = torch.linalg.vector_norm(e, dim=-1, keepdim=True)
    return e / torch.where(norm > 0, norm, 1.0)


def cosine_rows(emb: Tensor, valid: Tensor, dtype: torch.dtype) -> Callable[[Tensor], Tensor]:
    """``row(j)`` → (B, P) cosines between item ``j: (B,)`` and every item; 0 for zero/invalid rows.

    For P ≤ GRAM_MAX_P the (B, P, P) Gram matrix is built once (one batched GEMM, far faster than k
    batched mat-vecs); above it each row is computed lazily from unit rows, in O(B·P·d) memory.
    """
    B, P, d = emb.shape
    rows = torch.arange(B, device=emb.device)
    if P > GRAM_MAX_P:
        e = unit_rows(emb, valid, dtype)
        return lambda j: torch.bmm(e, e[rows, j][:, :, None]).squeeze(-1)
    e = emb.to(dtype)
    G = torch.bmm(e, e.transpose(1, 2))  # (B, P, P) raw dot products
    norm = G.diagonal(dim1=1, dim2=2).clamp_min(0.0).sqrt()
    inv = torch.where(valid & (norm > 0), 1.0 / torch.where(norm > 0, norm, 1.0), 0.0)
    S = (
        torch.where(valid[:, :, None] & valid[:, None, :], G, 0.0)
        * inv[:, :, None]
        * inv[:, None, :]
    )
    return lambda j: S[rows, j]


def dpp_greedy(
    quality: Tensor,
    emb: Tensor,
    k: int,
    valid: Tensor | None = None,
    quality_weight: float = 1.0,
    dtype: torch.dtype = torch.float64,
) -> tuple[Tensor, Tensor]:
    """Greedy DPP MAP (Chen et al. 2018, incremental Cholesky) for a batch of queries.

    quality: (B, P) float — per-item score; q = max(score, 1e-10) ** quality_weight.
    emb: (B, P, d) float — item embeddings; the similarity is the cosine of rows.
    valid: (B, P) bool or None — False marks padding, which is never picked.
    Returns ``(selected, gains)``: selected (B, k) long in greedy order, −1 once a query has no valid item
    left; gains (B, k) = d_j*² at pick time (``dtype``), NaN where padded. Always exactly min(k, n_valid)
    picks per query (no ε stopping rule); ties go to the lowest index. Computes in ``dtype`` (float64 by
    default, matching a double-precision reference).
    """
    valid = _check(quality, emb, k, valid, "quality")
    B, P = quality.shape
    dev = quality.device
    cos_row = cosine_rows(emb, valid, dtype)
    q = torch.where(valid, quality.to(dtype), 1.0).clamp_min(Q_FLOOR) ** quality_weight  # (B, P)
    d2 = q * q + D2_JITTER
    open_ = valid.clone()  # valid and not yet selected
    selected = torch.full((B, k), -1, dtype=torch.long, device=dev)
    gains = torch.full((B, k), float("nan"), dtype=dtype, device=dev)
    C = torch.zeros((B, min(k, P), P), dtype=dtype, device=dev)  # Cholesky rows, zero where skipped
    rows = torch.arange(B, device=dev)
    for s in range(min(k, P)):
        score = torch.where(open_, d2, float("-inf"))
        j = score.argmax(dim=1)  # first index on ties (documented for CPU and CUDA)
        dj2 = score[rows, j]
        found = dj2 > float("-inf")
        selected[:, s] = torch.where(found, j, -1)
        gains[:, s] = torch.where(found, dj2, float("nan"))
        open_[rows, j] = False  # rows with nothing found were all-closed already
        if s == k - 1 or not bool(found.any()):
            break
        active = found & (dj2 >= D2_STOP)
        l_row = q[rows, j, None] * q * cos_row(j)  # L[j*, :]  (B, P)
        if s:
            l_row = l_row - torch.einsum("bt,btp->bp", C[rows, :s, j], C[:, :s])
        c = l_row / torch.where(active, dj2, 1.0).sqrt()[:, None]
        c = torch.where(active[:, None], c, 0.0)
        C[:, s] = c
        d2 = (d2 - c * c).clamp_min(0.0)
    return selected, gains


def mmr_greedy(
    relevance: Tensor,
    emb: Tensor,
    k: int,
    lam: float = 0.7,
    valid: Tensor | None = None,
    dtype: torch.dtype = torch.float64,
) -> Tensor:
    """Maximal Marginal Relevance selection for a batch of queries.

    relevance: (B, P) float; emb: (B, P, d) float (cosine of rows); valid: (B, P) bool or None.
    First pick = argmax relevance; then argmax lam·rel_i − (1−lam)·max_{s∈selected} cos(e_i, e_s).
    Returns selected (B, k) long in pick order, −1 padding; ties go to the lowest index.
    """
    valid = _check(relevance, emb, k, valid, "relevance")
    B, P = relevance.shape
    dev = relevance.device
    cos_row = cosine_rows(emb, valid, dtype)
    rel = torch.where(valid, relevance.to(dtype), 0.0)
    open_ = valid.clone()
    selected = torch.full((B, k), -1, dtype=torch.long, device=dev)
    max_sim = torch.zeros((B, P), dtype=dtype, device=dev)
    rows = torch.arange(B, device=dev)
    for s in range(min(k, P)):
        obj = rel if s == 0 else lam * rel - (1.0 - lam) * max_sim
        j = torch.where(open_, obj, float("-inf")).argmax(dim=1)
        found = open_[rows, j]
        if not bool(found.any()):
            break
        selected[:, s] = torch.where(found, j, -1)
        open_[rows, j] = False
        sim = cos_row(j)
        max_sim = sim if s == 0 else torch.maximum(max_sim, sim)
    return selected
