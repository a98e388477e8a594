"""Row-wise dot products in one fixed summation order: the same float32 bits on every device.

A reduction kernel (numpy's ``einsum``, ``torch.sum`` on the CPU or on CUDA) picks its own order of
additions, by SIMD width, thread split or launch shape, so two devices (or two batch shapes on a
GPU) can round one pair's cosine differently. Here every pair is summed by the same sequence of
element-wise float32 operations, each correctly rounded (IEEE 754) wherever it runs:

1. ``p_j = a_j · b_j`` for every dimension ``j``;
2. while more than one column is left: with ``w`` columns, if ``w`` is odd, ``p_0 += p_{w-1}`` and
   ``w -= 1``; then ``p_j += p_{j + w/2}`` for ``j < w/2`` and ``w = w/2``;
3. the dot is ``p_0``.

(384 columns: 192, 96, 48, 24, 12, 6, 3, then ``p_0 + p_2``, then ``+ p_1``.) Separate multiply and
add kernels, so no fused multiply-add can round differently. numpy on the host and torch on any
device run the very same sequence (:func:`pair_dots` takes either), and a pair's bits depend on its
two vectors only, never on the other pairs, the block or the thread that computed it
(``tests/ops/test_pairdot.py``: a per-element Python reference, numpy against torch, cuda against cpu).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

HOST_BLOCK = 2048  # pairs per block on the host, numpy or torch on the CPU (any size, same bits)
DEVICE_BLOCK = 1 << 16  # pairs per block on a torch accelerator (any size, the same bits)


def fold(p):
    """Column 0 of ``p`` (pairs × dims, numpy or torch, float32) after the fixed halving order of
    the module docstring; ``p`` may be overwritten."""
    w = p.shape[1]
    while w > 1:
        if w % 2:
            p[:, 0] += p[:, w - 1]
            w -= 1
        h = w // 2
        p = p[:, :h] + p[:, h:w]
        w = h
    return p[:, 0]


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def pair_dots(xq, xb, qi, di, block: int | None = None) -> np.ndarray:
    """float32 ``xq[qi[j]] · xb[di[j]]`` for every j, summed by :func:`fold`. ``xb`` is a numpy
    array (``xq`` too) or a torch tensor on any device (``xq`` then moves there; the result comes
    back to the host in one transfer); the bits are the same either way."""
    qi, di = np.asarray(qi, np.int64), np.asarray(di, np.int64)
    if xb.shape[1] == 0 or len(qi) == 0:
        return np.zeros(len(qi), np.float32)
    dots = _device_dots if _is_torch(xb) else _host_dots
    return dots(xq, xb, qi, di, block or default_block(xb))


def on_accelerator(xb) -> bool:
    """Whether ``xb`` is a torch tensor on a device other than the CPU."""
    return _is_torch(xb) and xb.device.type != "cpu"


def default_block(xb) -> int:
    """Pairs per block for vectors ``xb``: ``DEVICE_BLOCK`` on an accelerator (few large launches),
    ``HOST_BLOCK`` on the CPU, numpy or torch (blocks that stay in cache: torch on the CPU ran
    2.06 s in blocks of 2^16 against 0.43 s in blocks of 2,048, 1.08M pairs of 384-d)."""
    return DEVICE_BLOCK if on_accelerator(xb) else HOST_BLOCK


def _host_dots(xq, xb, qi, di, block: int) -> np.ndarray:
    """:func:`pair_dots` in numpy, blocks shared among the cores this process may use."""
    out = np.empty(len(qi), np.float32)

    def one(s: int) -> None:
        e = s + block
        a = np.take(xq, qi[s:e], axis=0).astype(np.float32, copy=False)
        out[s:e] = fold(a * np.take(xb, di[s:e], axis=0).astype(np.float32, copy=False))

    starts = range(0, len(qi), block)
    workers = min(len(starts), len(os.sched_getaffinity(0)))
    if workers <= 1:
        for s in starts:
            one(s)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, starts))
    return out


def _device_dots(xq, xb, qi, di, block: int) -> np.ndarray:
    """:func:`pair_dots` in torch on ``xb``'s device: the pairs' indices go there once, the
    scores come back once."""
    import torch

    dev = xb.device
    q = xq if _is_torch(xq) else torch.from_numpy(np.ascontiguousarray(xq, np.float32))
    # the indices as copies: a read-only array (a polars column's view) would share memory and
    # make torch warn; they go to the device anyway
    q, tq, td = q.to(dev), torch.tensor(qi, device=dev), torch.tensor(di, device=dev)
    out = torch.empty(len(qi), dtype=torch.float32, device=dev)
    with torch.no_grad():
        for s in range(0, len(qi), block):
            e = s + block
            p = q.index_select(0, tq[s:e]).mul_(xb.index_select(0, td[s:e]))
            out[s:e] = fold(p)
    return out.cpu().numpy()
