"""One answer across devices (docs/reliability.md "One answer across devices"): the array code a
GPU runs, checked here on its CPU twins.

CuPy's ``scatter_max``/``scatter_min`` on float64 round through ``fmaxf``/``fminf`` (float32;
``cupy/_core/include/cupy/atomics.cuh``): per-query maxima of ``fuse=wsum``'s ``max``/``minmax``
norms came back rounded on a GPU (``tests/system/test_gpu.py::test_fusion_on_device_matches_host[wsum-kw0]``
failed on an H200). These tests run the numpy twin with ``numpy.maximum.at``/``minimum.at``
replaced by CuPy's contract (its dtypes, float64 through float32), so a float64 scatter that
reaches CuPy's atomics fails here as it did there.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.core import backend
from pipeline.report import crossdevice
from pipeline.stages.fuse import fuse
from tests.stages.test_fusion import CHANNELS, WEIGHTS, candidates, ref_wsum, same

_REAL = {"max": np.maximum, "min": np.minimum}
CUPY_SCATTER_DTYPES = (np.int32, np.float32, np.float64, np.uint32, np.uint64)


class _CupyScatter:
    """``np.maximum``/``np.minimum`` whose ``.at`` keeps ``cupyx.scatter_max``/``min``'s contract:
    its dtypes only, and a float64 target updated through float32 (``fmaxf``)."""

    def __init__(self, how: str) -> None:
        self.ufunc = _REAL[how]

    def __call__(self, *args, **kwargs):
        return self.ufunc(*args, **kwargs)

    def at(self, out, index, values):
        if out.dtype.type not in CUPY_SCATTER_DTYPES:
            raise TypeError(f"cupy scatter does not take {out.dtype}")
        if out.dtype != np.float64:
            return self.ufunc.at(out, index, np.asarray(values, out.dtype))
        touched = np.zeros(out.shape, bool)
        touched[index] = True
        narrow = out.astype(np.float32)
        self.ufunc.at(narrow, index, np.asarray(values, np.float32))
        out[touched] = narrow[touched]


@pytest.fixture
def cupy_scatter(monkeypatch):
    """numpy standing in for CuPy: its scatter contract, and declared as rounding float64."""
    monkeypatch.setattr(backend, "rounds_float64_scatter", lambda out: True)
    monkeypatch.setattr(np, "maximum", _CupyScatter("max"))
    monkeypatch.setattr(np, "minimum", _CupyScatter("min"))


def test_the_contract_rounds_a_float64_scatter():
    out = np.full(2, -np.inf)
    _CupyScatter("max").at(out, np.array([0, 0]), np.array([0.1, 0.2]))
    assert out[0] == np.float64(np.float32(0.2)) != 0.2 and out[1] == -np.inf


def test_float_keys_sort_as_the_floats_and_come_back_to_the_bit():
    """Hand-picked values in their order (-0 just below +0), and random doubles of every
    magnitude against numpy's sort."""
    x = np.array([-np.inf, -1e308, -3.5, -5e-324, -0.0, 0.0, 5e-324, 2.0, 1e308, np.inf])
    k = backend.float_keys(x)
    assert k.dtype == np.uint64 and (np.diff(k.astype(object)) > 0).all()
    assert backend.keys_to_floats(k).view(np.int64).tolist() == x.view(np.int64).tolist()
    rng = np.random.default_rng(2)
    y = rng.standard_normal(5000) * 10.0 ** rng.uniform(-300, 300, 5000)
    ky = backend.float_keys(y)
    assert np.array_equal(np.sort(y), y[np.argsort(ky)])
    assert np.array_equal(backend.keys_to_floats(ky).view(np.int64), y.view(np.int64))


def test_scatter_extreme_is_exact_under_cupys_contract(cupy_scatter):
    """float64 maxima and minima of repeated indices, the untouched slot kept: exact values."""
    out = np.array([-np.inf, -np.inf, 7.0])
    backend.scatter_extreme(out, np.array([0, 1, 0, 1]), np.array([0.1, -0.3, 0.2, -0.7]), "max")
    assert out.tolist() == [0.2, -0.3, 7.0]
    low = np.array([np.inf, 1.0])
    backend.scatter_extreme(low, np.array([0, 0]), np.array([0.1, 0.30000000000000004]), "min")
    assert low.tolist() == [0.1, 1.0]
    ints = np.zeros(2, np.int32)
    backend.scatter_extreme(ints, np.array([1, 1]), np.array([3, 5], np.int32), "max")
    assert ints.tolist() == [0, 5]


@pytest.mark.parametrize("seed", range(3))
def test_wsum_under_cupys_contract_gives_the_polars_bits(seed, cupy_scatter):
    """test_gpu's ``wsum-kw0`` case (dense none, lexical max, collab minmax) on the numpy twin
    with CuPy's scatter: the bits of the polars expression, as on the host."""
    norm = {"dense": "none", "lexical": "max", "collab": "minmax"}
    cand = candidates(seed)
    got = fuse(cand, CHANNELS, "wsum", weights=WEIGHTS, norm=norm)
    assert same(got, ref_wsum(cand, CHANNELS, WEIGHTS, norm, {}))


NEW_TEXTS = [
    ("how do I rotate the warehouse credentials?", None),
    ("who approves a new PII source?", None),
    ("orders connector lag", "procedures"),
    ("retention of customer addresses", None),
]


def test_a_gpu_built_cache_and_cpu_misses_give_the_rows_of_one_cpu_run(tmp_path, monkeypatch):
    """The serve path across devices: a nightly precompute on a GPU (``device=cuda``) fills the
    recall cache, and ``recall serve`` on a CPU (``device=cpu``) answers from it and computes its
    misses itself. The device is not part of the recipe, so the CPU service reads the GPU's
    entries (hits), and hits and misses are the rows of one CPU ``recall run``.

    Here the "GPU" precompute stands for one by what differs in its arithmetic that this machine
    can run: ``device=cuda`` in its config (so in every key it writes), the device resolved to
    torch's CPU, the dense scan in torch with the node vectors resident (``dense.runs_in_torch``:
    the matrix product + top-k, the exact rescore and every pair score a GPU runs, on torch
    tensors). On this stand-in the rows are equal to the bit; on a real GPU the scores within
    ``SCORE_BOUND`` (docs/reliability.md "One answer across devices")."""
    import polars as pl
    from omegaconf import OmegaConf

    from pipeline.channels import dense
    from pipeline.contract.registry import call_target
    from pipeline.recallcache import keys, recipe
    from pipeline.run import precompute
    from pipeline.serve import RecallCache, Service
    from tests.helpers.serve_support import config, reference, rows_of, same_bits

    cpu = config(tmp_path, "data=sample")
    gpu = OmegaConf.merge(cpu, {"device": "cuda"})
    ns = lambda c: keys.namespace("sample", **recipe.namespace_parts(c))  # noqa: E731
    assert ns(gpu) == ns(cpu)
    with monkeypatch.context() as m:
        m.setattr(backend, "resolve_device", lambda name: "cpu")
        m.setattr(dense, "runs_in_torch", lambda kind, device: True)
        res = precompute.precompute(gpu)
    ds = call_target(cpu.data)
    new = pl.DataFrame(
        {
            "query_id": [f"new{i}" for i in range(len(NEW_TEXTS))],
            "text": [t for t, _s in NEW_TEXTS],
            "doc_scope": [None if s is None else [s] for _t, s in NEW_TEXTS],
        },
        schema={"query_id": pl.String, "text": pl.String, "doc_scope": pl.List(pl.String)},
    )
    ref, _ = reference(cpu, tmp_path, "cpu-run")
    ref_new, _ = reference(cpu, tmp_path, "cpu-run-new", dataset=ds.part(new))
    assert RecallCache(cpu.cache_dir).namespaces() == [res["namespace"]]
    service = Service(cpu)
    try:
        hits = 0
        for row in ds.queries.iter_rows(named=True):
            if row["context"] or row["viewer"]:
                continue  # keyed with its fields (tests/serve/test_serve.py)
            got = service.recall(row["text"], row.get("doc_scope"), k=None)
            assert got["cache"] == "hit"
            same_bits(got["rows"], rows_of(ref, row["query_id"]))
            hits += 1
        for i, (text, scope) in enumerate(NEW_TEXTS):
            got = service.recall(text, scope, k=None)
            assert got["cache"] == "miss"
            same_bits(got["rows"], rows_of(ref_new, f"new{i}"))
        assert hits >= 20
    finally:
        service.close()


def _recall(rows) -> pl.DataFrame:
    """A recall table from (query, node, rank, score) rows."""
    return pl.DataFrame(rows, schema=["query_id", "node_id", "rank", "score"], orient="row")


WANT = [("q1", "a", 1, 0.9), ("q1", "b", 2, 0.80004), ("q1", "c", 3, 0.8), ("q2", "d", 1, 0.5)]


def test_compare_takes_near_ties_and_the_bound_and_nothing_else():
    """Hand-made tables: the same rows; b and c (0.80004 and 0.8, within 1e-4) swapped; a and b
    (0.9 and 0.80004) swapped; a score moved by 2e-5 and by 2e-4; q2's d replaced by e at its
    cut with the score 0.5 (within the bound of q2's last score) and with 0.3."""
    want = _recall(WANT)
    same = crossdevice.compare(want, want)
    assert same["ok"] and same["moved"] == 0 and same["max_diff"] == {"score": 0.0}
    swap = _recall([WANT[0], ("q1", "c", 2, 0.8), ("q1", "b", 3, 0.80004), WANT[3]])
    res = crossdevice.compare(want, swap)
    assert res["ok"] and res["moved"] == 2 and res["moves_are_ties"]
    far = _recall([("q1", "b", 1, 0.80004), ("q1", "a", 2, 0.9), *WANT[2:]])
    assert not crossdevice.compare(want, far)["ok"]
    for delta, ok in ((2e-5, True), (2e-4, False)):
        moved = _recall([*WANT[:3], ("q2", "d", 1, 0.5 + delta)])
        res = crossdevice.compare(want, moved)
        assert res["ok"] is ok and res["max_diff"]["score"] == pytest.approx(delta)
    for score, ok in ((0.5, True), (0.3, False)):
        other = _recall([*WANT[:3], ("q2", "e", 1, score)])
        res = crossdevice.compare(want, other)
        assert res["only_one"] == 2 and res["ok"] is ok


def test_near_ties_stay_within_a_query():
    """0.5 and 0.5 in two queries are no tie; 0.7 and 0.70005 in one are."""
    score = np.array([0.9, 0.5, 0.5, 0.7, 0.70005])
    query = np.array(["a", "a", "b", "c", "c"])
    assert crossdevice.near_ties(score, query, 1e-4).tolist() == [False, False, False, True, True]


def test_a_row_more_or_fewer_at_a_cut_moves_only_that_query():
    """One device keeps a fourth q1 row 5e-5 under the cut (the other cuts it): allowed, and q2's
    row is no move; the same extra row 0.1 under the cut is not."""
    want = _recall(WANT)
    extra = _recall([*WANT[:3], ("q1", "x", 4, 0.79995), WANT[3]])
    for a, b in ((want, extra), (extra, want)):
        res = crossdevice.compare(a, b)
        assert res["ok"] and res["only_one"] == 1 and res["moved"] == (1 if a is extra else 0)
    far = _recall([*WANT[:3], ("q1", "x", 4, 0.7), WANT[3]])
    assert not crossdevice.compare(far, want)["ok"]
