"""Batched DPP / MMR selection against plain per-query numpy references and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.ops.dpp import dpp_greedy, mmr_greedy

# the CPU against itself would compare one code path with itself: the CPU is checked against the
# references above; this parity runs only where a GPU exists
DEVICES = [
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(
                not torch.cuda.is_available(),
                reason="no CUDA GPU here (torch sees none): GPU parity not run",
            ),
        ],
    )
]


def _unit(emb: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(emb, axis=1, keepdims=True)
    return emb / np.where(norm > 0, norm, 1.0)


def ref_dpp(score: np.ndarray, emb: np.ndarray, k: int, valid: np.ndarray, qw: float = 1.0):
    """BME dppGreedySelect for one query, written as plain loops (float64)."""
    P = len(score)
    q = np.maximum(score.astype(np.float64), 1e-10) ** qw
    e = _unit(emb.astype(np.float64))
    L = q[:, None] * (e @ e.T) * q[None, :]
    d2 = q * q + 1e-8
    sel, gains, C = [], [], []
    for it in range(k):
        best, best_v = -1, -math.inf
        for i in range(P):
            if valid[i] and i not in sel and d2[i] > best_v:  # strict '>' = first index on ties
                best, best_v = i, d2[i]
        if best < 0:
            break
        sel.append(best)
        gains.append(best_v)
        if it == k - 1 or best_v < 1e-10:
            continue
        c = np.array(
            [
                (L[best, i] - sum(row[best] * row[i] for row in C)) / math.sqrt(best_v)
                for i in range(P)
            ]
        )
        C.append(c)
        d2 = np.maximum(0.0, d2 - c * c)
    pad = k - len(sel)
    return np.array(sel + [-1] * pad), np.array(gains + [np.nan] * pad)


def ref_mmr(rel: np.ndarray, emb: np.ndarray, k: int, lam: float, valid: np.ndarray) -> np.ndarray:
    """MMR for one query, plain loops."""
    e = _unit(emb.astype(np.float64))
    sel: list[int] = []
    for _ in range(k):
        best, best_v = -1, -math.inf
        for i in range(len(rel)):
            if not valid[i] or i in sel:
                continue
            v = rel[i] if not sel else lam * rel[i] - (1 - lam) * max(e[i] @ e[s] for s in sel)
            if v > best_v:
                best, best_v = i, v
        if best < 0:
            break
        sel.append(best)
    return np.array(sel + [-1] * (k - len(sel)))


def _random_batch(rng: np.random.Generator, n: int, p_max: int = 40):
    """n problems with random P in [3, 40], padded to p_max with NaN garbage marked invalid."""
    d = int(rng.integers(2, 24))
    score = np.full((n, p_max), np.nan, np.float32)
    emb = np.full((n, p_max, d), np.nan, np.float32)
    valid = np.zeros((n, p_max), bool)
    for b in range(n):
        P = int(rng.integers(3, 41))
        score[b, :P] = rng.uniform(-0.1, 1.0, P)  # some ≤ 0 → floored at 1e-10
        emb[b, :P] = rng.normal(size=(P, d))
        emb[b, :P][rng.random(P) < 0.05] = 0.0  # zero vectors stay zero
        valid[b, :P] = rng.random(P) < rng.uniform(0.3, 1.0)
    return score, emb, valid


def test_dpp_matches_reference_on_random_batches():
    rng = np.random.default_rng(13)
    for _ in range(5):  # 5 batches × 10 problems = 50 problems, each batch with its own k
        score, emb, valid = _random_batch(rng, 10)
        k = int(rng.integers(1, 46))
        qw = float(rng.choice([1.0, 0.5, 2.0]))
        sel, gains = dpp_greedy(
            torch.from_numpy(score), torch.from_numpy(emb), k, torch.from_numpy(valid), qw
        )
        assert sel.shape == gains.shape == (10, k)
        for b in range(10):
            r_sel, r_gains = ref_dpp(score[b], emb[b], k, valid[b], qw)
            np.testing.assert_array_equal(sel[b].numpy(), r_sel)
            np.testing.assert_allclose(
                gains[b].numpy(), r_gains, rtol=1e-9, atol=1e-12, equal_nan=True
            )


def test_mmr_matches_reference_on_random_batches():
    rng = np.random.default_rng(7)
    score, emb, valid = _random_batch(rng, 20)
    got = mmr_greedy(
        torch.from_numpy(score), torch.from_numpy(emb), 12, 0.6, torch.from_numpy(valid)
    )
    for b in range(20):
        np.testing.assert_array_equal(got[b].numpy(), ref_mmr(score[b], emb[b], 12, 0.6, valid[b]))


def test_dpp_bme_hand_example_skips_duplicate():
    # e0 == e1, e2 ⟂ both, q = 1: d² = 1+1e-8 for all → pick 0; c = [1, 1, 0]/√(1+1e-8) so
    # d1² = 1+1e-8 − 1/(1+1e-8) ≈ 2e-8 while d2² stays 1+1e-8 → pick 2, not the duplicate.
    emb = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    sel, gains = dpp_greedy(torch.ones(1, 3), emb, 2)
    assert sel.tolist() == [[0, 2]]
    assert gains[0].tolist() == pytest.approx([1 + 1e-8, 1 + 1e-8], rel=1e-12)


def test_dpp_identical_vectors_pick_in_index_order():
    emb = torch.ones(2, 6, 4)
    sel, _ = dpp_greedy(torch.full((2, 6), 0.5), emb, 6)
    assert sel.tolist() == [[0, 1, 2, 3, 4, 5]] * 2


def test_dpp_large_quality_hits_skip_branch_and_still_picks_k():
    # q = 1e6 with identical vectors: the residual d² of the rest cancels to ≲ 1e-10, so no Cholesky row
    # is computed after that point, yet exactly k distinct items are returned.
    sel, gains = dpp_greedy(torch.full((1, 5), 1e6), torch.ones(1, 5, 3), 5)
    assert sorted(sel[0].tolist()) == [0, 1, 2, 3, 4] and sel[0, 0] == 0
    assert float(gains[0, 1:].max()) < 1e-6


def test_dpp_pads_when_fewer_valid_than_k():
    valid = torch.tensor([[True, False, True, True, False]])
    sel, gains = dpp_greedy(torch.rand(1, 5), torch.randn(1, 5, 8), 5, valid)
    assert sorted(sel[0, :3].tolist()) == [0, 2, 3] and sel[0, 3:].tolist() == [-1, -1]
    assert torch.isnan(gains[0, 3:]).all() and not torch.isnan(gains[0, :3]).any()


def test_dpp_orthogonal_embeddings_sort_by_quality():
    quality = torch.tensor([[0.3, 0.9, 0.5, 0.9, 0.1]])
    sel, gains = dpp_greedy(quality, torch.eye(5)[None], 5)
    assert sel.tolist() == [[1, 3, 2, 0, 4]]  # quality desc, tie 1 vs 3 → lower index
    expected = quality[0, [1, 3, 2, 0, 4]].double() ** 2 + 1e-8  # no interaction: gains = q² + 1e-8
    torch.testing.assert_close(gains[0], expected, rtol=1e-12, atol=0)


def test_mmr_hand_example():
    # rel = [0.9, 0.8, 0.5]; cos(e0,e1)=0.8, cos(e0,e2)=0, cos(e1,e2)=0.6; lam = 0.7.
    # step 1: argmax rel → 0.
    # step 2: item 1: 0.7·0.8 − 0.3·0.8 = 0.32; item 2: 0.7·0.5 − 0.3·0 = 0.35 → 2.
    # step 3: only item 1 left → 1.
    emb = torch.tensor([[[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]]])
    assert mmr_greedy(torch.tensor([[0.9, 0.8, 0.5]]), emb, 3, lam=0.7).tolist() == [[0, 2, 1]]


def test_mmr_lam_one_is_relevance_sort_with_padding():
    rel = torch.tensor([[0.2, 0.7, 0.7, 0.1, 0.9]])
    valid = torch.tensor([[True, True, True, False, True]])
    got = mmr_greedy(rel, torch.randn(1, 5, 6), 6, lam=1.0, valid=valid)
    assert got.tolist() == [[4, 1, 2, 0, -1, -1]]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="emb must be"):
        dpp_greedy(torch.rand(2, 5), torch.rand(2, 4, 3), 2)
    with pytest.raises(ValueError, match="k=-1"):
        dpp_greedy(torch.rand(2, 5), torch.rand(2, 5, 3), -1)
    with pytest.raises(ValueError, match="valid must be"):
        mmr_greedy(torch.rand(2, 5), torch.rand(2, 5, 3), 2, valid=torch.ones(2, 5))


@pytest.mark.parametrize("device", DEVICES)
def test_device_matches_cpu(device):
    rng = np.random.default_rng(3)
    score = torch.from_numpy(rng.uniform(0.05, 1.0, (64, 24)).astype(np.float32))
    emb = torch.from_numpy(
        rng.normal(size=(64, 24, 48)).astype(np.float32)
    )  # full rank: no near-ties
    valid = torch.from_numpy(rng.random((64, 24)) < 0.8)
    cpu_sel, cpu_gains = dpp_greedy(score, emb, 16, valid)
    sel, gains = dpp_greedy(score.to(device), emb.to(device), 16, valid.to(device))
    assert sel.device.type == device
    torch.testing.assert_close(sel.cpu(), cpu_sel, rtol=0, atol=0)
    torch.testing.assert_close(gains.cpu(), cpu_gains, rtol=1e-9, atol=0, equal_nan=True)
    mmr_cpu = mmr_greedy(score, emb, 16, 0.7, valid)
    torch.testing.assert_close(
        mmr_greedy(score.to(device), emb.to(device), 16, 0.7, valid.to(device)).cpu(),
        mmr_cpu,
        rtol=0,
        atol=0,
    )


def test_lazy_rows_match_gram(monkeypatch):
    """Above GRAM_MAX_P rows come lazily from unit embeddings; both paths give the same picks."""
    import pipeline.ops.dpp as dpp

    rng = np.random.default_rng(5)
    score, emb, valid = (torch.from_numpy(a) for a in _random_batch(rng, 16))
    gram = dpp_greedy(score, emb, 15, valid), mmr_greedy(score, emb, 15, 0.7, valid)
    monkeypatch.setattr(dpp, "GRAM_MAX_P", 0)
    lazy = dpp_greedy(score, emb, 15, valid), mmr_greedy(score, emb, 15, 0.7, valid)
    assert torch.equal(gram[0][0], lazy[0][0]) and torch.equal(gram[1], lazy[1])
    torch.testing.assert_close(gram[0][1], lazy[0][1], rtol=1e-9, atol=1e-12, equal_nan=True)
