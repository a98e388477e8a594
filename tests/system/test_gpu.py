"""GPU parity: the same code path with device=cuda against device=cpu (skipped without a CUDA GPU)."""

import numpy as np
import polars as pl
import pytest

from pipeline.core import backend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not backend.has_cuda(), reason="no CUDA GPU here (torch sees none): GPU parity not run"
    ),
]


def test_minilm_encode_cuda_matches_cpu():
    from pipeline.encoders.models import SentenceEncoder

    texts = [
        "batch recall for agent memory",
        "a second, longer sentence about graphs and diffusion",
    ] * 8
    cpu = SentenceEncoder().encode(texts, "cpu")
    gpu = SentenceEncoder().encode(texts, "cuda")
    assert np.abs(cpu - gpu).max() < 1e-3
    assert (cpu * gpu).sum(axis=1).min() > 0.9999


def _both_devices(compose, tmp_path, overrides):
    """(manifests, recall tables) by device of ``preset=best signals=default`` with ``overrides``,
    each device with its own cache folder (a shared one would hand the CUDA run the CPU run's
    embeddings and candidates)."""
    from pipeline.run import runner

    out, man = {}, {}
    for dev in ("cpu", "cuda"):
        cfg = compose(
            [
                "preset=best",
                "signals=default",
                *overrides,
                f"device={dev}",
                f"out_dir={tmp_path / dev}",
                f"cache_dir={tmp_path / ('cache-' + dev)}",
            ]
        )
        man[dev] = runner.run(cfg, tmp_path / dev)["manifest"]
        out[dev] = pl.read_parquet(tmp_path / dev / "recall.parquet")
    return man, out


@pytest.mark.parametrize("embed", ["hashing", "minilm"])
def test_full_run_cuda_matches_cpu(compose, tmp_path, embed):
    """Every score column and the ranking compared. ``hashing`` runs every GPU stage without
    model weights; ``minilm`` adds the encoder on the GPU, in float32 here (the same vectors to
    float rounding; its float16 default: the next test)."""
    extra = ["embed.precision=float32"] if embed == "minilm" else []
    man, out = _both_devices(compose, tmp_path, [f"embed={embed}", *extra])
    assert man["cuda"]["reused_stages"] == [] and man["cuda"]["device"] == "cuda"
    cpu, gpu = out["cpu"], out["cuda"]
    assert cpu.columns == gpu.columns and cpu.height == gpu.height
    assert (
        cpu["query_id"].to_list() == gpu["query_id"].to_list()
        and cpu["rank"].to_list() == gpu["rank"].to_list()
    )
    moved = cpu["node_id"] != gpu["node_id"]
    if moved.any():  # only where two CPU scores are tied to 1e-4 may the order differ
        s = cpu["score"].to_numpy()
        near = np.minimum(np.abs(np.diff(s, prepend=np.inf)), np.abs(np.diff(s, append=-np.inf)))
        assert (near[moved.to_numpy()] < 1e-4).all()
    both = cpu.join(gpu, on=["query_id", "node_id"], suffix="_gpu")
    assert both.height == cpu.height  # the same recall sets
    floats = [c for c, t in cpu.schema.items() if t.is_float()]
    assert "score" in floats and len(floats) > 3
    for col in floats:
        a, b = both[col].to_numpy(), both[f"{col}_gpu"].to_numpy()
        np.testing.assert_allclose(b, a, atol=1e-3, equal_nan=True, err_msg=col)


def test_full_run_with_minilm_in_float16_gives_the_cpus_rows(compose, tmp_path):
    """MiniLM's default on a GPU (``embed.precision=auto``: float16) against the CPU's float32
    vectors: the same rows and ranks, a move only inside a near-tie of the embeddings' bound
    (``crossdevice.EMBED_BOUND``), every float column within it (docs/reliability.md "One answer
    across devices")."""
    from pipeline.report import crossdevice

    man, out = _both_devices(compose, tmp_path, ["embed=minilm"])
    assert man["cuda"]["device"] == "cuda"
    res = crossdevice.compare(out["cpu"], out["cuda"], crossdevice.EMBED_BOUND)
    assert res["ok"], crossdevice.summary("sample, minilm float16", res)


def test_cugraph_pagerank_leiden_components_match_cpu():
    pytest.importorskip("cugraph", reason="cugraph is not installed (pip install -e '.[gpu]')")
    import cupyx.scipy.sparse as cusp
    import scipy.sparse as sp

    from pipeline.ops import graphalgo
    from pipeline.ops.ppr import components

    rng = np.random.default_rng(5)
    n, m = 2000, 6000
    src, dst = rng.integers(0, n - 50, m), rng.integers(0, n - 50, m)  # the last 50 nodes isolated
    w = rng.uniform(0.1, 1.0, m)
    backend.reset()
    pr = graphalgo.pagerank(src, dst, w, n, device="cuda")
    assert backend.GRAPH_IMPL["pagerank"] == "cugraph"
    np.testing.assert_allclose(pr, graphalgo.pagerank(src, dst, w, n, device="cpu"), atol=1e-6)
    comm = graphalgo.leiden(src, dst, n, device="cuda")
    assert backend.GRAPH_IMPL["leiden"] == "cugraph" and comm.shape == (n,)
    assert (
        len(set(comm[-50:].tolist())) == 50 and comm[-50:].min() > comm[:-50].max()
    )  # isolated: alone
    adj = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    lab_gpu = components(cusp.csr_matrix(adj), "cuda").get()
    lab_cpu = components(adj, "cpu")
    assert backend.GRAPH_IMPL["components"] == "scipy"  # the last call was the cpu one
    pairs = set(zip(lab_cpu.tolist(), lab_gpu.tolist()))
    assert (
        len(pairs) == len(set(lab_cpu.tolist())) == len(set(lab_gpu.tolist()))
    )  # the same partition


def test_explicit_cuda_resolves_and_auto_picks_gpu():
    assert backend.resolve_device("cuda") == "cuda" and backend.resolve_device("auto") == "cuda"


@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_pedsa_and_ppr_cupy_match_scipy():
    import cupy
    import cupyx.scipy.sparse as cusp
    import scipy.sparse as sp

    from pipeline.ops.pedsa import pedsa
    from pipeline.ops.ppr import ppr

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


@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_diffusion_hits_on_device_match_host():
    """The diffusion stage cuts each query's ``keep`` best graph hits where the energies live and
    moves only those; on CuPy that must give the numpy path's (row, column, energy) exactly,
    ties at the cut included (they go to the lower row)."""
    import cupy

    from pipeline.stages.diffuse import _hits

    rng = np.random.default_rng(11)
    out = rng.random((3000, 40)).astype(np.float32)
    out[rng.random(out.shape) < 0.3] = 0.0
    out[100:140, 5] = 0.5  # a tie across the cut of column 5
    for keep in (0, 7, 500):
        host = _hits(out, keep)
        dev = _hits(cupy.asarray(out), keep)
        for a, b in zip(host, dev):
            np.testing.assert_array_equal(a, b)
        if keep:
            assert np.bincount(host[1]).max() <= keep


@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
def test_score_and_head_on_device_match_host():
    """``stages.score.scores`` on cuda keeps the score on the GPU (CuPy), and
    ``stages.select.scored_rows`` cuts the head there: the same rows, the same score bits, as the
    host's numpy twin, in one and in many head blocks."""
    from pipeline.ops import scoring
    from pipeline.stages import score as score_stage
    from pipeline.stages import select as select_stage

    rng = np.random.default_rng(12)
    n = 50_000
    cand = pl.DataFrame(
        {
            "query_idx": rng.integers(0, 300, n),
            "node_idx": rng.permutation(n),
            "fused": rng.integers(0, 50, n) / 50.0,
            "graph": rng.random(n) * 1e-2,
        }
    )
    terms = {"fused": 1.0, "graph": 100.0}
    hf, hs = score_stage.scores(cand, terms, [], True)
    df, ds = score_stage.scores(cand, terms, [], True, device="cuda")
    assert type(ds.score).__module__.startswith("cupy") and not score_stage.on_host(ds)
    np.testing.assert_array_equal(hs.score.view(np.int64), ds.score.get().view(np.int64))
    p = select_stage.SelectParams.defaults()
    for cells in (scoring.HEAD_CELLS, 500):
        old, scoring.HEAD_CELLS = scoring.HEAD_CELLS, cells
        try:
            host = select_stage.scored_rows(hf, hs, 10, p)
            dev = select_stage.scored_rows(df, ds, 10, p)
        finally:
            scoring.HEAD_CELLS = old
        assert dev.equals(host) and host.height < n


@pytest.mark.skipif(not backend.has_cupy(), reason="needs CuPy with a CUDA GPU")
@pytest.mark.parametrize(
    "method,kw",
    [
        ("wsum", {"norm": {"dense": "none", "lexical": "max", "collab": "minmax"}}),
        ("rrf", {"single_branch_raw": True}),
        ("snake", {"top_n": 5}),
    ],
)
def test_fusion_on_device_matches_host(method, kw):
    """``stages.fuse.fuse`` with ``device="cuda"`` (``ops.fusion`` on CuPy) gives the host's
    rows and ``fused`` bits, nulls included."""
    from pipeline.stages.fuse import fuse
    from tests.stages.test_fusion import CHANNELS, WEIGHTS, candidates

    cand = candidates(3)
    host = fuse(cand, CHANNELS, method, weights=WEIGHTS, **kw)
    dev = fuse(cand, CHANNELS, method, "cuda", weights=WEIGHTS, **kw)
    assert dev.equals(host)
