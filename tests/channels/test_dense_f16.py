"""ReMe's float16 cosines (``dense.cosine=float16``, preset reme): ReMe @ c8e12487
``batch_cosine_similarity`` on float16 arrays, checked by hand on a case where float16 ties two
chunks that float64 orders."""

import numpy as np
import polars as pl
import pytest

from pipeline.channels.dense_f16 import Float16Scores, reme_cosine
from pipeline.contract.errors import ConfigError
from pipeline.run import runner
from tests.adapters.test_adapter_reme import _queries, build


def test_float16_cosine_by_hand_and_its_tie():
    # q = (1, 0, 0); a = (1, 0.5, 0); b = (1, 0.5009765625, 0) (both float16 values).
    # float64: cos a = 1/√1.25 = 0.894427 > cos b = 1/√1.250977 = 0.894078.
    # float16: dot 1; |a| = √1.25 = 1.118034 → 1.1181640625, |b| = 1.118471 → 1.1181640625
    # (spacing 2^-10); 1 / 1.1181640625 = 0.894323 → 0.89453125 (spacing 2^-11): a tie.
    q = np.array([[1, 0, 0]], np.float16)
    m = np.array([[1, 0.5009765625, 0], [1, 0.5, 0]], np.float16)  # b is node 0, a node 1
    assert reme_cosine(q, m)[0].tolist() == [0.89453125, 0.89453125]
    f16 = Float16Scores(q, m)
    qi, ni, s = f16.top(np.array([0]), np.array([0, 1]), 2)
    assert ni.tolist() == [0, 1]  # the tie goes to the lower node, not float64's order
    assert f16.pairs(np.array([0, 0]), np.array([1, 0])).tolist() == [0.89453125] * 2
    # dense.ties=store: the chunk earlier in ReMe's chunk store wins the tie (vector_search's
    # heap on (score, -order)); b stored after a here
    f16.tie = np.array([1, 0])
    qi, ni, s = f16.top(np.array([0]), np.array([0, 1]), 2)
    assert ni.tolist() == [1, 0]
    q_, n_, s_, rank = f16.reorder(np.array([0, 0]), np.array([0, 1]), s)
    assert (n_.tolist(), rank.tolist()) == ([1, 0], [1, 2])


def test_a_zero_vector_scores_0_and_preset_reme_uses_float16(compose):
    q = np.zeros((1, 2), np.float16)
    assert reme_cosine(q, np.array([[1, 0]], np.float16)).tolist() == [[0.0]]
    cfg = compose(["preset=reme"])
    assert (cfg.dense.cosine, cfg.dense.no_query_vector, cfg.k) == ("float16", "keyword", 5)
    assert compose([]).dense.cosine == "float32"


def test_float16_needs_one_vector_per_query(compose, tmp_path):
    """A context blend gives a query two vectors: ReMe scores one; a clear error says so."""
    store = tmp_path / "store"
    build(store)
    qf = tmp_path / "q.parquet"
    _queries(qf, [{"query_id": "q1", "text": "vault", "embedding": [0.0, 0.0, 1.0, 1.0]}])
    pl.read_parquet(qf).with_columns(context=pl.lit(["earlier turn"])).write_parquet(qf)
    cfg = compose(
        ["data=reme", f"data.path={store}", f"data.queries={qf}", "preset=reme", "query.blend=true"]
        + [f"out_dir={tmp_path / 'run'}"]
    )
    with pytest.raises(ConfigError, match="dense.cosine=float16"):
        runner.run(cfg, tmp_path / "run")
