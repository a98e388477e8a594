"""Sparse-code residual of BME residual recall: LASSO by FISTA, batched in torch (docs/presets.md, ``bme``).

min_α ½‖q − Eᵀα‖² + λ‖α‖₁ with step 1/L, L = max absolute row sum of G = E Eᵀ (an upper bound of the
largest eigenvalue, as BME uses), soft-thresholding and the standard momentum
t_{k+1} = (1 + √(1 + 4t_k²))/2. Padded basis rows are zero, so their gradient and their α stay 0.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def _unit_rows(E: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    nrm = torch.linalg.vector_norm(E, dim=-1, keepdim=True)
    return torch.where(nrm < 1e-10, 0.0, E / nrm.clamp_min(1e-10)) * rows[..., None]


def fista_batched(
    E: torch.Tensor, m: torch.Tensor, q: torch.Tensor, lam: float = 0.1, n_iter: int = 80
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched LASSO residual. E: (B, m_max, d) signed basis (rows re-normalised to unit length here,
    zero rows stay zero); m: (B,) valid rows; q: (B, d) raw query (not normalised, as in BME).

    Returns alpha (B, m_max) (0 on padding rows) and residual (B, d) = q − Eᵀα, where coefficients with
    |α| < 1e-10 are left out as BME does. A problem with L < 1e-10 gets α = 0 and residual = q.
    """
    if E.ndim != 3 or q.shape != (E.shape[0], E.shape[2]):
        raise ValueError(
            f"need E (B, m_max, d) and q (B, d); got {tuple(E.shape)} and {tuple(q.shape)}"
        )
    rows = torch.arange(E.shape[1], device=E.device) < torch.as_tensor(m, device=E.device)[:, None]
    En = _unit_rows(E, rows)
    G = En @ En.transpose(1, 2)
    b = (En @ q[..., None]).squeeze(-1)
    L = G.abs().sum(-1).amax(-1)
    step = torch.where(L < 1e-10, 0.0, 1.0 / L.clamp_min(1e-10))[:, None]
    thr = lam * step
    alpha = torch.zeros_like(b)
    y, t = alpha, 1.0
    for _ in range(n_iter):
        z = y - step * ((G @ y[..., None]).squeeze(-1) - b)
        nxt = torch.sign(z) * (z.abs() - thr).clamp_min(0)
        t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
        y = nxt + ((t - 1) / t_next) * (nxt - alpha)
        alpha, t = nxt, t_next
    coef = torch.where(alpha.abs() < 1e-10, 0.0, alpha)
    return alpha, q - (coef[:, None, :] @ En).squeeze(1)


def fista_reference(
    E: np.ndarray, q: np.ndarray, lam: float = 0.1, n_iter: int = 80
) -> tuple[np.ndarray, np.ndarray]:
    """Per-problem numpy ``fista_batched``. E: (m, d), q: (d,) → alpha (m,), residual (d,)."""
    nrm = np.linalg.norm(E, axis=1, keepdims=True)
    En = np.where(nrm < 1e-10, 0.0, E / np.maximum(nrm, 1e-10))
    G, b = En @ En.T, En @ q
    L = float(np.abs(G).sum(1).max()) if len(G) else 0.0
    alpha = np.zeros(len(En))
    if L < 1e-10:
        return alpha, q.copy()
    y, t = alpha, 1.0
    for _ in range(n_iter):
        z = y - (G @ y - b) / L
        nxt = np.sign(z) * np.maximum(np.abs(z) - lam / L, 0)
        t_next = (1 + math.sqrt(1 + 4 * t * t)) / 2
        y = nxt + ((t - 1) / t_next) * (nxt - alpha)
        alpha, t = nxt, t_next
    return alpha, q - np.where(np.abs(alpha) < 1e-10, 0.0, alpha) @ En
