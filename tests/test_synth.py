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


def test_names_give_the_entity_layer_something_and_leave_the_rest():
    """names=k: each unit's text gains two of its cluster's names (first and last word), each
    query one (last word), all capitalised made-up words that entities.extract finds; everything
    else (embeddings, edges, the word lists) is what make() gives without names."""
    from pipeline.ops import entities

    plain, xb, xq = make(300, 10, seed=5)
    named, xb2, xq2 = make(300, 10, seed=5, names=4)
    assert np.array_equal(xb, xb2) and np.array_equal(xq, xq2) and plain.edges.equals(named.edges)
    for a, b in zip(plain.nodes["text"].to_list(), named.nodes["text"].to_list()):
        first, *middle, last = b.split()
        assert " ".join(middle) == a and first.istitle() and last.istitle()
        assert set(entities.extract(b)) == {first.lower(), last.lower()}
    for a, b in zip(plain.queries["text"].to_list(), named.queries["text"].to_list()):
        *words, name = b.split()
        assert " ".join(words) == a and entities.extract(b) == [name.lower()]
    # names never repeat across clusters (the serial-number tail): 200 × 20 distinct names
    from pipeline.synth.corpus import _names

    assert len(set(_names(200, 20, 13).ravel().tolist())) == 4000
