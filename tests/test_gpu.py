"""GPU parity: the same code path with device=cuda against device=cpu (skipped without a CUDA GPU)."""
import numpy as np
import polars as pl
import pytest

from pipeline import backend

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not backend.has_cuda(), reason="needs a CUDA GPU (torch sees none)")]


def test_minilm_encode_cuda_matches_cpu():
    from pipeline.stages.embed import SentenceEncoder

    texts = ["batch recall for agent memory", "a second, longer sentence about graphs and diffusion"] * 8
    cpu = SentenceEncoder().encode(texts, "cpu")
    gpu = SentenceEncoder().encode(texts, "cuda")
    assert np.abs(cpu - gpu).max() < 1e-3
    assert (cpu * gpu).sum(axis=1).min() > 0.9999


def test_full_run_cuda_matches_cpu(compose, tmp_path):
    from pipeline import runner

    out = {}
    for dev in ("cpu", "cuda"):
        cfg = compose(["preset=best", f"device={dev}", f"out_dir={tmp_path / dev}"])
        runner.run(cfg, tmp_path / dev)
        out[dev] = pl.read_parquet(tmp_path / dev / "recall.parquet")
    assert (out["cpu"]["node_id"] == out["cuda"]["node_id"]).mean() > 0.98
    both = out["cpu"].join(out["cuda"], on=["query_id", "node_id"], suffix="_gpu")
    assert np.abs(both["dense"].to_numpy() - both["dense_gpu"].to_numpy()).max() < 1e-3


def test_explicit_cuda_resolves_and_auto_picks_gpu():
    assert backend.resolve_device("cuda") == "cuda" and backend.resolve_device("auto") == "cuda"


@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_pedsa_and_ppr_cupy_match_scipy():
    import cupy
    import cupyx.scipy.sparse as cusp
    import scipy.sparse as sp

    from pipeline.ops.diffusion import pedsa, ppr

    rng = np.random.default_rng(3)
    n, m, b = 500, 3000, 16
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.uniform(0.1, 1.0, m).astype(np.float32)
    adj = sp.coo_matrix((np.r_[w, w], (np.r_[r, c], np.r_[c, r])), shape=(n, n)).tocsr()
    inh = sp.csr_matrix((n, n), dtype=np.float32)
    e0 = np.zeros((n, b), np.float32)
    e0[rng.integers(0, n, 40), rng.integers(0, b, 40)] = 1.0
    cpu = pedsa(adj, inh, e0)
    gpu = pedsa(cusp.csr_matrix(adj), cusp.csr_matrix(inh), cupy.asarray(e0)).get()
    assert np.abs(cpu - gpu).max() < 1e-5
    pers = e0 / np.maximum(e0.sum(axis=0), 1)
    pc, _ = ppr(adj, pers)
    pg, _ = ppr(cusp.csr_matrix(adj), cupy.asarray(pers))
    assert np.abs(pc - pg.get()).max() < 1e-6
