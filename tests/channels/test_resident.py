"""Node vectors resident on the device for a whole group (``channels.dense.resident``, issue 29):
when the dense channel scans in torch, the channel's rescore and pair scores, the component
join's pair scores and DPP's gathers read one device copy, and the recall is the host run's bit
for bit. On the CPU the copy is torch on the CPU (the code the GPU runs); ``cuda`` skips here."""

from __future__ import annotations

import datetime as dt
import sys

import numpy as np
import polars as pl
import pytest
import torch
from omegaconf import OmegaConf

from pipeline.channels import dense
from pipeline.core import backend
from pipeline.core.context import RunContext, RunState
from pipeline.ops import pairdot
from pipeline.report import crossdevice
from pipeline.stages import select
from tests.helpers import differential_corpus as corpus
from tests.helpers.differential import config
from tests.helpers.isolated import fresh_run

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not backend.has_cuda(), reason="no GPU")),
]
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _ctx(state: RunState, xb: np.ndarray) -> RunContext:
    ctx = RunContext(state, pl.DataFrame(), pl.DataFrame(), NOW)
    ctx.xb = xb
    return ctx


def _state(device: str = "cpu") -> RunState:
    rng = np.random.default_rng(3)
    state = RunState(OmegaConf.create({}), None, device, None)
    state.xb = rng.normal(size=(50, 8)).astype(np.float32)
    return state


def test_host_index_reads_the_host_array():
    state = _state()
    ctx = _ctx(state, state.xb)
    assert dense.resident(ctx, "flat") is state.xb
    assert "xb_resident" not in state.consts


def test_whole_corpus_groups_share_one_copy_and_others_have_their_own():
    state = _state()
    a, b = _ctx(state, state.xb), _ctx(state, state.xb)
    ta = dense.resident(a, "torch")
    assert isinstance(ta, torch.Tensor) and ta.dtype == torch.float32
    assert dense.resident(b, "torch") is ta and dense.resident(a, "torch") is ta  # one copy
    assert np.array_equal(ta.numpy().view(np.uint32), state.xb.view(np.uint32))
    rows = np.array([7, 3, 40])
    sub = _ctx(state, np.ascontiguousarray(state.xb[rows]))
    ts = dense.resident(sub, "torch")
    assert ts is not ta and np.array_equal(ts.numpy(), state.xb[rows])


def test_flat_is_torch_on_cuda_only_without_faiss_gpus(monkeypatch):
    monkeypatch.setattr(backend, "faiss_gpus", lambda: 0)
    assert dense.runs_in_torch("flat", "cuda") and dense.runs_in_torch("torch", "cpu")
    assert not dense.runs_in_torch("flat", "cpu") and not dense.runs_in_torch("hnsw", "cuda")
    monkeypatch.setattr(backend, "faiss_gpus", lambda: 1)
    assert not dense.runs_in_torch("flat", "cuda")


def test_select_rows_gathers_on_the_device_the_values_of_the_host():
    rng = np.random.default_rng(5)
    xb = rng.normal(size=(30, 6)).astype(np.float32)
    idx = rng.integers(0, 30, size=(4, 9))
    host = select._rows(xb, idx, "cpu")
    dev = select._rows(torch.from_numpy(xb), idx, "cpu")
    assert dev.shape == (4, 9, 6) and torch.equal(dev, host)
    assert torch.equal(host[2, 5], torch.from_numpy(xb[idx[2, 5]]))


DATA = corpus.base(small=6, big=150, many=80, big_q=10, many_q=10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "recipe, extra",
    [("best", []), ("bme", []), ("dpp-wide", []), ("best", ["dense.prf_docs=3"])],
    ids=["best", "bme", "dpp-wide", "best-rocchio"],
)
def test_pipeline_reads_resident_vectors_and_answers_as_the_host(
    recipe, extra, device, tmp_path, monkeypatch
):
    """Every pair score of the torch run runs on a tensor of ``device`` (the channel's rescore,
    its scores of other channels' hits, the join of graph hits), DPP gathers from one, and the
    recall equals ``dense.index=flat`` on the host (each run its own folders): to the bit on the
    CPU; on cuda by the cross-device contract, its dense cosines to the bit."""
    want = fresh_run(
        config(recipe, ["dense.index=flat", *extra]), tmp_path, "host", dataset=corpus.dataset(DATA)
    ).recall()
    callers, gathers = set(), []
    real_dots, real_rows = pairdot._device_dots, select._rows

    def dots(xq, xb, qi, di, block):
        assert xb.device.type == device
        # this spy < pair_dots < pair_scores < exact_top or dense_pairs < their caller
        callers.add((sys._getframe(3).f_code.co_name, sys._getframe(4).f_code.co_name))
        return real_dots(xq, xb, qi, di, block)

    def rows(xb, idx, dev):
        gathers.append(type(xb).__module__)
        return real_rows(xb, idx, dev)

    monkeypatch.setattr(pairdot, "_device_dots", dots)
    monkeypatch.setattr(pairdot, "_host_dots", None)  # nothing may score on the host arrays
    monkeypatch.setattr(select, "_rows", rows)
    cfg = config(recipe, ["dense.index=torch", *extra])
    cfg.device = device
    got = fresh_run(cfg, tmp_path, "resident", dataset=corpus.dataset(DATA)).recall()
    # the channel's rescore, the join's scores of graph hits, and (with BM25 beside it: not bme)
    # its scores of the lexical channel's hits
    assert {("exact_top", "_searched"), ("dense_pairs", "_join_block")} <= callers
    assert (("dense_pairs", "scores") in callers) == ("lexical" in cfg.channels)
    if recipe != "best":
        assert gathers and set(gathers) == {"torch"}
    assert got.height
    if device == "cpu":
        assert got.equals(want)
        return
    # on cuda the whole run is on the GPU: diffusion's sparse sums (cuSPARSE) and DPP's products
    # (cuBLAS) are not the host's bits, so the recall is the host's by the cross-device contract
    # (docs/reliability.md "One answer across devices"); the dense cosines, all pair scores on
    # the resident vectors (ops.pairdot), are the host's to the bit
    res = crossdevice.compare(want, got)
    assert res["ok"], crossdevice.summary(recipe, res)
    both = want.join(got, on=["query_id", "node_id"], suffix="_cuda")
    for col in ("dense", "bme_dense"):
        if col in want.columns:
            a, b = both[col].to_numpy(), both[f"{col}_cuda"].to_numpy()
            assert a.tobytes() == b.tobytes(), col
