"""Synthetic corpus: deterministic per seed, valid contract tables, unit embeddings."""

import numpy as np

from pipeline.schema import conform
from pipeline.synth.corpus import make


def test_synthetic_corpus_is_deterministic_and_valid():
    ds, xb, xq = make(500, 20, seed=3)
    ds2, xb2, xq2 = make(500, 20, seed=3)
    assert ds.nodes.equals(ds2.nodes) and ds.edges.equals(ds2.edges) and np.array_equal(xb, xb2)
    conform(ds.nodes, "nodes", "synthetic")
    conform(ds.edges, "edges", "synthetic")
    assert xb.shape == (500, 384) and xq.shape == (20, 384)
    assert np.allclose(np.linalg.norm(xb, axis=1), 1.0, atol=1e-5)
    assert ds.edges.height > 1500 and (ds.edges["src"] != ds.edges["dst"]).all()
