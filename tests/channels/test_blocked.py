"""Blocked dense scan over a memmap: parity with FAISS flat, running top-k, cache, end to end."""

import faiss
import numpy as np
import polars as pl
import pytest

from pipeline.channels import blocked, dense
from pipeline.run import runner
from tests.helpers.paths import tiny_ws_overrides


def _data(n=2000, nq=50, d=32, seed=0):
    rng = np.random.default_rng(seed)
    xb = rng.normal(size=(n, d)).astype(np.float32)
    xq = rng.normal(size=(nq, d)).astype(np.float32)
    return xb / np.linalg.norm(xb, axis=1, keepdims=True), xq / np.linalg.norm(
        xq, axis=1, keepdims=True
    )


@pytest.mark.parametrize(
    "block,max_scores", [(1, 1 << 24), (7, 20), (256, 256 * 9), (5000, 1 << 24)]
)
def test_blocked_matches_faiss_flat(block, max_scores):
    xb, xq = _data()
    flat = faiss.IndexFlatIP(xb.shape[1])
    flat.add(xb)
    Df, If = flat.search(xq, 10)
    D, I = blocked.search(xb, xq, 10, block=block, max_scores=max_scores)
    np.testing.assert_allclose(D, Df, rtol=0, atol=1e-5)
    assert (I == If).mean() > 0.99  # equal up to float-rounding ties


def test_ties_by_node_index_and_small_corpus():
    xb = np.array([[1, 0], [1, 0], [0, 1]], np.float32)
    D, I = blocked.search(xb, np.array([[1, 0]], np.float32), 5, block=1)
    assert I.tolist() == [[0, 1, 2]] and D.tolist() == [[1.0, 1.0, 0.0]]
    D, I = blocked.search(xb, np.zeros((0, 2), np.float32), 2)
    assert D.shape == (0, 0) and I.shape == (0, 0)


def test_index_on_a_memmap_and_cache(tmp_path):
    xb, xq = _data(500, 5)
    calls = []

    def compute(texts):
        calls.append(len(texts))
        return xb, len(texts)

    texts = [f"t{i}" for i in range(500)]
    a, n1 = blocked.memmap_cached(tmp_path, "m", texts, compute)
    b, n2 = blocked.memmap_cached(tmp_path, "m", texts, compute)
    assert isinstance(b, np.memmap) and calls == [500] and (n1, n2) == (500, 0)
    index = dense.build_index(b, "blocked", block=64)
    D, I = dense.search(index, xq, 5)
    Df, If = blocked.search(xb, xq, 5, block=10_000)
    np.testing.assert_allclose(D, Df, atol=1e-6)
    assert not list(tmp_path.rglob("*.tmp"))


def test_run_with_dense_blocked_equals_flat(compose, tmp_path, cache_dir):
    over = [*tiny_ws_overrides(), "embed=hashing", "report=false", "preset=best"]
    runner.run(compose([*over, f"out_dir={tmp_path / 'flat'}"]), tmp_path / "flat")
    res = runner.run(
        compose([*over, "dense=blocked", "dense.block=3", f"out_dir={tmp_path / 'blk'}"]),
        tmp_path / "blk",
    )
    a = pl.read_parquet(tmp_path / "flat" / "recall.parquet")
    b = pl.read_parquet(tmp_path / "blk" / "recall.parquet")
    assert a.select("query_id", "node_id").equals(b.select("query_id", "node_id"))
    np.testing.assert_allclose(a["score"].to_numpy(), b["score"].to_numpy(), atol=1e-5)
    assert res["manifest"]["config"]["dense"]["index"] == "blocked" and list(
        cache_dir.glob("memmap/hashing-v1-*.npy")
    )
