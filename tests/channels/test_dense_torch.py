"""``dense.index=torch`` (blocked matrix product + topk, pipeline.channels.dense_torch): hand-computed
cases, parity with FAISS's flat scan, and the dense channel's full output bit-identical to
``dense.index=flat`` on data crossing the block sizes, RESCORE_EXTRA and TINY."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.channels import dense, dense_torch
from pipeline.channels.candidates import DenseChannel
from pipeline.core import backend
from pipeline.ops.torch_topk import merge_rows, topk_rows
from pipeline.stages.channels import DenseParams

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not backend.has_cuda(), reason="no GPU")),
]


@pytest.mark.parametrize("device", DEVICES)
def test_topk_rows_ties_by_lower_index(device):
    s = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.0], [3.0, 1.0, 3.0, 0.5, 3.0]], device=device)
    v, i = topk_rows(s, 2)
    assert i.cpu().tolist() == [[1, 2], [0, 2]]
    assert v.cpu().tolist() == [[2.0, 2.0], [3.0, 3.0]]
    v, i = topk_rows(s, 9)  # k above the width: the whole row, ordered
    assert i.cpu().tolist() == [[1, 2, 3, 0, 4], [0, 2, 4, 1, 3]]
    v, i = merge_rows(
        torch.tensor([[2.0, 1.0]]),
        torch.tensor([[3, 1]]),
        torch.tensor([[2.0]]),
        torch.tensor([[7]]),
        2,
    )
    assert i.tolist() == [[3, 7]] and v.tolist() == [[2.0, 2.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_search_hand_computed(device, monkeypatch):
    monkeypatch.setattr(dense_torch, "NODE_BLOCK", 2)  # the tie 0/2 spans two node blocks
    xb = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], np.float32)
    xq = np.array([[1, 0], [0, 1]], np.float32)
    D, I = dense.build_index(xb, "torch", device=device).search(xq, 3)
    assert I.tolist() == [[0, 2, 3], [1, 3, 0]]
    np.testing.assert_array_equal(D, np.array([[1, 1, 0.6], [1, 0.8, 0]], np.float32))
    assert D.dtype == np.float32 and I.dtype == np.int64


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_search_matches_faiss_flat(device, monkeypatch):
    monkeypatch.setattr(dense_torch, "NODE_BLOCK", 97)
    monkeypatch.setattr(dense_torch, "QUERY_BLOCK", 13)
    rng = np.random.default_rng(3)
    xb, xq = _unit(rng.normal(size=(1000, 24))), _unit(rng.normal(size=(60, 24)))
    D, I = dense.build_index(xb, "torch", device=device).search(xq, 15)
    Df, If = dense.search(dense.build_index(xb, "flat"), xq, 15)
    np.testing.assert_array_equal(I, If)  # continuous random scores: no ties
    np.testing.assert_allclose(D, Df, atol=1e-5)
    exact = xq.astype(np.float64) @ xb.T.astype(np.float64)
    np.testing.assert_allclose(D, np.take_along_axis(exact, I, 1), atol=1e-5)


def _channel(xb, xq, index, device, k):
    p = DenseParams.defaults(index=index, candidates=k)
    ch = DenseChannel(xb, xq, np.arange(len(xq)), np.ones(len(xq)), p, 13, device)
    return ch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n, nq", [(300, 40), (2500, 40)])  # nq·n below and above dense.TINY
def test_channel_bit_identical_to_flat(device, n, nq, monkeypatch):
    """Duplicated vectors make exact ties at the cut (exact_top's rescan), near-duplicates ties
    within RESCORE_TOL; two scopes; blocks smaller than the data."""
    rng = np.random.default_rng(7)
    base = _unit(rng.normal(size=(n // 5, 16)))
    xb = np.concatenate([base, base, base + 1e-6, base[::-1], base])[:n]
    xb = _unit(xb)
    xq = _unit(np.concatenate([base[: nq // 2], rng.normal(size=(nq - nq // 2, 16))]))
    nodes = np.arange(n)
    parts = [(nodes[: n // 2 + 3], np.arange(0, nq, 2)), (nodes[n // 3 :], np.arange(1, nq, 2))]
    assert (nq * n <= dense.TINY) == (n == 300)
    want = _channel(xb, xq, "flat", "cpu", 12).ranks(parts)
    assert want.height == nq * 12
    monkeypatch.setattr(dense_torch, "NODE_BLOCK", 101)
    monkeypatch.setattr(dense_torch, "QUERY_BLOCK", 7)
    ch = _channel(xb, xq, "torch", device, 12)
    got = ch.ranks(parts)
    assert got.equals(want)
    qi, ni = want["query_idx"].to_numpy(), want["node_idx"].to_numpy()
    assert (
        ch.scores(qi, ni).tobytes() == _channel(xb, xq, "flat", "cpu", 12).scores(qi, ni).tobytes()
    )


def test_flat_on_cuda_without_faiss_gpu_runs_torch(monkeypatch):
    """device=cuda with faiss-cpu: ``flat`` builds the torch index, and a fallback note says so
    (the index is only built here; its search needs the GPU)."""
    made = []
    monkeypatch.setattr(backend, "faiss_gpus", lambda: 0)
    monkeypatch.setattr(
        dense_torch.TorchIndex, "__init__", lambda self, xb, device: made.append(device)
    )
    backend.reset()
    index = dense.build_index(np.zeros((4, 2), np.float32), "flat", device="cuda")
    assert isinstance(index, dense_torch.TorchIndex) and made == ["cuda"]
    assert any("dense.index=torch" in r for r in backend.FALLBACKS)
    backend.reset()


def test_scan_runs_without_tf32_and_restores_the_setting(monkeypatch):
    """TF32 products (``float32_matmul_precision`` "high") err by ~1e-3, beyond RESCORE_TOL: the
    scan forces "highest" and gives the caller's setting back."""
    seen = []
    real = dense_torch.topk_rows

    def spy(s, k):
        seen.append(torch.get_float32_matmul_precision())
        return real(s, k)

    monkeypatch.setattr(dense_torch, "topk_rows", spy)
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        dense.build_index(np.eye(3, dtype=np.float32), "torch").search(
            np.eye(3, dtype=np.float32), 2
        )
        assert seen == ["highest"] and torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(old)


@pytest.mark.parametrize("device", DEVICES)
def test_rescore_runs_on_the_resident_vectors(device, monkeypatch):
    """A torch index's hits are rescored by ``exact_top`` on the index's own device tensor (the
    vectors are not gathered on the host), and the bits are the host rescore's."""
    from pipeline.ops import pairdot

    seen = []
    real = pairdot._device_dots

    def spy(xq, xb, qi, di, block):
        seen.append((xb.device.type, len(qi)))
        return real(xq, xb, qi, di, block)

    monkeypatch.setattr(pairdot, "_device_dots", spy)
    rng = np.random.default_rng(11)
    xb, xq = _unit(rng.normal(size=(400, 16))), _unit(rng.normal(size=(30, 16)))
    parts = [(np.arange(400), np.arange(30))]
    got = _channel(xb, xq, "torch", device, 10).ranks(parts)
    assert seen and {d for d, _n in seen} == {device} and sum(n for _d, n in seen) >= 30 * 10
    assert got.equals(_channel(xb, xq, "flat", "cpu", 10).ranks(parts))
