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
