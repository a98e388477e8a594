"""NMF novelty gate of BME residual recall (docs/presets.md, ``bme``), batched over problems in torch.

One problem = a basis of ``m`` node embeddings and one query. Problems are padded to ``m_max`` rows and
``k_max`` topics; padded rows and topics are zero and, since multiplicative updates keep zeros at zero,
never touch the valid block. Device and dtype follow ``V``. ``nmf_reference`` and ``novelty_reference``
are the per-problem numpy versions (same arithmetic, a Python loop over iterations) used by the tests
and as the benchmark baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from pipeline.contract.errors import require_one_of
from pipeline.ops.dpp import MIN_ROWS

LCG_SEED, LCG_A, LCG_C, LCG_MOD = 42, 1664525, 1013904223, 2**32
MAX_TOPICS = 15
ALIGN = 16  # floats (64 bytes): MKL's bits depend on where a batch member starts (see padded_rows)
BASIS_MODES = ("abs", "shift", "split")


@dataclass
class SolverInfo:
    """Per-problem convergence report: ``n_iter`` (B,) int64, ``rel_error`` (B,) ‖V−WH‖_F/‖V‖_F,
    ``converged`` (B,) bool (stopped early on ``tol``)."""

    n_iter: torch.Tensor
    rel_error: torch.Tensor
    converged: torch.Tensor


@lru_cache(maxsize=4)
def _lcg_table(n: int) -> np.ndarray:
    x, out = LCG_SEED, np.empty(n)
    for i in range(n):
        x = (LCG_A * x + LCG_C) % LCG_MOD
        out[i] = x / (LCG_MOD - 1)
    out.flags.writeable = False
    return out


def lcg_uniform(n: int) -> np.ndarray:
    """First ``n`` draws r = x/(2³²−1) of BME's LCG from seed 42: (n,) float64 (cached)."""
    return _lcg_table(max(1024, 1 << max(n - 1, 0).bit_length()))[:n]


def _init_value(avg, r):
    return abs(avg + 0.5 * avg * (r - 0.5)) + 1e-6


def _avg(mean_v: float, k: int) -> float:
    return max(math.sqrt((mean_v or 0.01) / max(1, k)), 0.01)  # BME: a zero mean falls back to 0.01


def bme_init(m: int, k: int, d: int, mean_v: float) -> tuple[np.ndarray, np.ndarray]:
    """BME's deterministic init: W0 (m, k), H0 (k, d) float64, filled row-major from one LCG stream."""
    vals = _init_value(_avg(mean_v, k), lcg_uniform(m * k + k * d))
    return vals[: m * k].reshape(m, k), vals[m * k :].reshape(k, d)


def _init_batched(
    m: torch.Tensor, k: torch.Tensor, d: int, mean_v: torch.Tensor, m_max: int, k_max: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """bme_init for every problem at once (float64, zero outside each problem's m×k / k×d block)."""
    dev = m.device
    r = torch.tensor(lcg_uniform(int((m * k).max()) + k_max * d), device=dev)
    avg = torch.sqrt(torch.where(mean_v > 0, mean_v, 0.01) / k.clamp_min(1)).clamp_min(0.01)
    i, j = torch.arange(m_max, device=dev), torch.arange(k_max, device=dev)
    w_mask = (i[None, :, None] < m[:, None, None]) & (j[None, None, :] < k[:, None, None])
    w_idx = torch.where(w_mask, i[None, :, None] * k[:, None, None] + j, 0)
    W = torch.where(w_mask, _init_value(avg[:, None, None], r[w_idx]), 0.0)
    # H of problem b is the contiguous stream slice starting at m_b·k_b: gather per distinct offset.
    offs, inv = torch.unique(m * k, return_inverse=True)
    blocks = torch.stack([r[o : o + k_max * d] for o in offs.tolist()]).view(-1, k_max, d)
    H = torch.where(
        (j[None, :] < k[:, None])[..., None], _init_value(avg[:, None, None], blocks[inv]), 0.0
    )
    return W, H


def padded_rows(m: int, d: int) -> int:
    """The basis rows a problem of ``m`` rows and width ``d`` is padded to: a function of (m, d) only,
    so that with ``k_width=ALIGN`` every (B, ·, ·) tensor of ``nmf_batched`` and ``fista_batched``
    has members starting on 64-byte boundaries. MKL gives other bits for a member of a batch at
    another alignment (measured: torch 2.13 CPU, m = 5, 7, 9 unpadded)."""
    step = max(4, ALIGN // math.gcd(d, ALIGN))
    return -(-m // step) * step


def _sizes(V: torch.Tensor, m, k) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, k) as long tensors of shape (B,) after checking V is (B, m_max, d) and
    1 <= k <= m <= m_max; k defaults to min(MAX_TOPICS, m)."""
    if V.ndim != 3:
        raise ValueError(f"V must be (B, m_max, d); got shape {tuple(V.shape)}")
    B, m_max, _d = V.shape
    m = torch.as_tensor(m, device=V.device).long()
    k = m.clamp(max=MAX_TOPICS) if k is None else torch.as_tensor(k, device=V.device).long()
    if (
        m.shape != (B,)
        or k.shape != (B,)
        or bool((m > m_max).any() | (k < 1).any() | (k > m).any())
    ):
        raise ValueError(f"need m, k of shape ({B},) with 1 <= k <= m <= {m_max}; got m={m}, k={k}")
    return m, k


def _update(W, H, V, Vt, eps_t) -> None:
    """One Lee–Seung multiplicative step, H then W, in place (keeps the elementwise part
    cache-resident); ``Vt`` is V transposed: V Hᵀ as (H Vᵀ)ᵀ, a plain NN product, ~2x faster on CPU."""
    Wt = W.transpose(1, 2)
    den = torch.baddbmm(eps_t, torch.bmm(Wt, W), H)
    H.mul_(torch.bmm(Wt, V)).div_(den)
    den = torch.baddbmm(eps_t, W, torch.bmm(H, H.transpose(1, 2)))
    W.mul_(torch.bmm(H, Vt).transpose(1, 2)).div_(den)


def _compact(live, *rows):
    """``rows`` (and ``live``) without the stopped problems, but keeping (as discarded passengers)
    the first stopped ones while fewer than MIN_ROWS are live: a one-row batch takes other kernels."""
    need = max(0, MIN_ROWS - int(live.sum()))
    keep = live | (torch.cumsum(~live, 0) <= need)
    return (*(x[keep] for x in rows), live[keep])


def nmf_batched(
    V: torch.Tensor,
    m: torch.Tensor,
    k: torch.Tensor | None = None,
    max_iter: int = 100,
    tol: float = 1e-4,
    eps: float = 1e-10,
    k_width: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, SolverInfo]:
    """Lee–Seung Frobenius NMF V ≈ WH per problem, H updated before W, BME init.

    V: (B, m_max, d) non-negative; m: (B,) valid rows; k: (B,) topics, default min(15, m); topics are
    padded to at least ``k_width`` (zero, never touching the valid block).
    Every 10th iteration a problem with ‖V−WH‖_F/‖V‖_F < tol stops (frozen); the rest continue and are
    compacted so stopped problems cost nothing, never below MIN_ROWS rows (stopped ones ride along,
    their later iterates dropped): a problem's bits then depend on its own V alone when every member
    has the same (m_max, d) and B ≥ MIN_ROWS (``pipeline.stages.novelty`` batches that way).
    Returns W (B, m_max, k_max), H (B, k_max, d), SolverInfo.
    """
    m, k = _sizes(V, m, k)
    B, m_max, d = V.shape
    if B == 0:
        z = torch.zeros(0, dtype=torch.long, device=V.device)
        return (
            V.new_zeros(0, m_max, 1),
            V.new_zeros(0, 1, d),
            SolverInfo(z, V.new_zeros(0), z.bool()),
        )
    k_max = max(int(k.max()), k_width)
    V = V * (torch.arange(m_max, device=V.device) < m[:, None])[..., None]
    mean_v = V.sum((1, 2), dtype=torch.float64) / (m * d).clamp_min(1)
    W, H = (x.to(V.dtype) for x in _init_batched(m, k, d, mean_v, m_max, k_max))
    v2 = (V * V).sum((1, 2))
    W_out, H_out = torch.empty_like(W), torch.empty_like(H)  # every problem is written below
    n_iter = torch.full((B,), max_iter, dtype=torch.long, device=V.device)
    converged = torch.zeros(B, dtype=torch.bool, device=V.device)
    idx, Va, v2a = torch.arange(B, device=V.device), V, v2
    live = torch.ones(B, dtype=torch.bool, device=V.device)  # compacted rows not yet stopped
    Vt = V.transpose(1, 2).contiguous()  # see _update
    eps_t = V.new_full((1, 1, 1), eps)
    for it in range(max_iter):
        _update(W, H, Va, Vt, eps_t)
        if it % 10 == 9:
            err2 = torch.baddbmm(Va, W, H, alpha=-1).square_().sum((1, 2))
            stop = live & (v2a > 0) & (torch.sqrt(err2 / v2a.clamp_min(eps)) < tol)
            if bool(stop.any()):
                done = idx[stop]
                W_out[done], H_out[done], n_iter[done], converged[done] = (
                    W[stop],
                    H[stop],
                    it + 1,
                    True,
                )
                live = live & ~stop
                if not bool(live.any()):
                    break
                idx, Va, Vt, v2a, W, H, live = _compact(live, idx, Va, Vt, v2a, W, H)
    W_out[idx[live]], H_out[idx[live]] = W[live], H[live]
    rel = torch.linalg.vector_norm(V - W_out @ H_out, dim=(1, 2)) / v2.sqrt().clamp_min(eps)
    return W_out, H_out, SolverInfo(n_iter=n_iter, rel_error=rel, converged=converged)


def novelty_batched(H: torch.Tensor, k: torch.Tensor, q: torch.Tensor) -> dict[str, torch.Tensor]:
    """Topic analysis of query q against each problem's topics H (BME ``nmfQueryAnalysis``).

    H: (B, k_max, d), k: (B,) valid topics, q: (B, d) prepared like V (``prepare_basis``).
    Returns p (B, k_max) = softmax(H·q) over valid topics (0 elsewhere), novelty (B,) =
    ‖q − Σ p_t H_t‖ / max(‖q‖, 1e-10), semantic_depth (B,) = 1 − entropy(p)/ln k (0 when k ≤ 1; BME's
    own formula divides by 1 there and would give 1, a case its ≥2-row gate never reaches with 15
    topics), topic_coverage (B,) int64 = #{p_t > 0.5/k}.
    """
    k = torch.as_tensor(k, device=H.device).long()
    valid = torch.arange(H.shape[1], device=H.device) < k[:, None]
    logits = (H @ q[..., None]).squeeze(-1).masked_fill(~valid, float("-inf"))
    p = torch.where(valid, torch.softmax(logits, dim=-1), 0.0)
    recon = (p[:, None, :] @ H).squeeze(1)
    qn = torch.linalg.vector_norm(q, dim=-1)
    novelty = torch.linalg.vector_norm(q - recon, dim=-1) / qn.clamp_min(1e-10)
    big = p > 1e-10
    entropy = -torch.where(big, p * torch.log(torch.where(big, p, 1.0)), 0.0).sum(-1)
    depth = torch.where(k > 1, 1 - entropy / torch.log(k.clamp_min(2).to(p.dtype)), 0.0)
    coverage = ((p > 0.5 / k.clamp_min(1)[:, None]) & valid).sum(-1)
    return {"p": p, "novelty": novelty, "semantic_depth": depth, "topic_coverage": coverage}


def prepare_basis(
    E: torch.Tensor,
    mode: str = "abs",
    *,
    q: torch.Tensor | None = None,
    m: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Make the non-negative NMF input from signed embeddings; rows are L2-normalised first
    (zero rows stay zero), padded rows (index ≥ m) are zeroed. E: (B, m_max, d), q: (B, d) raw.

    - ``abs``   (BME fidelity): V = |E|, q → |q|. Loses signs, so opposite directions look alike.
    - ``shift``: V = E − min(E) per problem (min over valid entries), q → q − min(E) (may be negative).
    - ``split``: V = [relu(E), relu(−E)] along d (2d columns), q → [relu(q), relu(−q)]; keeps signs.
    Returns (V, q') with q' None when q is None.
    """
    require_one_of("mode", mode, BASIS_MODES)
    rows = (
        torch.ones(E.shape[:-1], dtype=torch.bool, device=E.device)
        if m is None
        else (
            torch.arange(E.shape[-2], device=E.device)
            < torch.as_tensor(m, device=E.device)[:, None]
        )
    )
    nrm = torch.linalg.vector_norm(E, dim=-1, keepdim=True)
    En = torch.where(nrm < 1e-10, 0.0, E / nrm.clamp_min(1e-10)) * rows[..., None]
    if mode == "abs":
        V, qv = En.abs(), None if q is None else q.abs()
    elif mode == "shift":
        lo = En.masked_fill(~rows[..., None], float("inf")).amin(dim=(-2, -1))
        V = (En - lo[:, None, None]) * rows[..., None]
        qv = None if q is None else q - lo[:, None]
    else:
        V = torch.cat([En.clamp_min(0), (-En).clamp_min(0)], dim=-1)
        qv = None if q is None else torch.cat([q.clamp_min(0), (-q).clamp_min(0)], dim=-1)
    return V, qv


def nmf_reference(
    V: np.ndarray, k: int, max_iter: int = 100, tol: float = 1e-4, eps: float = 1e-10
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Per-problem numpy NMF, same semantics as ``nmf_batched``. V: (m, d) → W (m, k), H (k, d),
    n_iter, rel_error."""
    m, d = V.shape
    W, H = bme_init(m, k, d, float(V.sum()) / max(1, m * d))
    v2, n_iter = float((V * V).sum()), max_iter
    for it in range(max_iter):
        H = H * (W.T @ V) / (W.T @ W @ H + eps)
        W = W * (V @ H.T) / (W @ (H @ H.T) + eps)
        if it % 10 == 9 and v2 > 0 and math.sqrt(float(((V - W @ H) ** 2).sum()) / v2) < tol:
            n_iter = it + 1
            break
    return W, H, n_iter, float(np.linalg.norm(V - W @ H)) / max(math.sqrt(v2), eps)


def novelty_reference(H: np.ndarray, q: np.ndarray) -> dict[str, float]:
    """Per-problem numpy ``novelty_batched``. H: (k, d), q: (d,)."""
    k, s = H.shape[0], H @ q
    p = np.exp(s - s.max())
    p /= p.sum()
    novelty = np.linalg.norm(q - p @ H) / max(np.linalg.norm(q), 1e-10)
    pb = p[p > 1e-10]
    depth = 1 - float(-(pb * np.log(pb)).sum()) / math.log(k) if k > 1 else 0.0
    return {
        "p": p,
        "novelty": float(novelty),
        "semantic_depth": depth,
        "topic_coverage": int((p > 0.5 / k).sum()),
    }
