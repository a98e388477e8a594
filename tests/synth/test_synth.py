"""Synthetic corpus: deterministic per seed, valid contract tables, unit embeddings."""

import numpy as np

from pipeline.contract.schema import conform
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


def test_chunked_noise_gives_the_one_block_vectors(monkeypatch):
    """The noise is drawn in row chunks (no (n, d) float64 block at 1M nodes); the vectors are
    bit for bit those of the one-block formula (written out here as the reference)."""
    from pipeline.synth import corpus

    monkeypatch.setattr(corpus, "CHUNK", 7)  # 500 rows: 71 full chunks and one of 3
    _, xb, _ = corpus.make(500, 5, seed=3, clusters=20)
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(20, 384)).astype(np.float32)
    cl = rng.integers(0, 20, 500)
    want = centers[cl] + 0.6 * rng.normal(size=(500, 384)).astype(np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.array_equal(xb, want)


def test_edges_per_node_follow_avg_degree():
    """avg_degree = 2K draws K·n edges, less the self-loops dropped (a handful)."""
    ds, _, _ = make(1000, 5, seed=3, avg_degree=10)
    assert 4990 <= ds.edges.height <= 5000
    ds, _, _ = make(1000, 5, seed=3)  # default 8: 4,000 drawn
    assert 3990 <= ds.edges.height <= 4000


def test_dup_share_copies_that_share_of_notes_and_leaves_the_rest():
    """dup_share=0.2: 100 of 500 notes take the text and vector of a note that is not itself a
    copy (exact duplicates under their own id); every other note, the ids and the edges are what
    make() gives without it."""
    plain, xb, _ = make(500, 10, seed=5, names=3)
    dup, xb2, _ = make(500, 10, seed=5, names=3, dup_share=0.2)
    texts, texts2 = plain.nodes["text"].to_list(), dup.nodes["text"].to_list()
    copies = np.flatnonzero((xb != xb2).any(axis=1))
    assert len(copies) == 100
    for i in range(500):
        if i not in copies:
            assert texts2[i] == texts[i] and np.array_equal(xb2[i], xb[i])
            continue
        src = [j for j in range(500) if j not in copies and np.array_equal(xb[j], xb2[i])]
        assert len(src) == 1 and texts2[i] == texts[src[0]]
    assert dup.nodes["node_id"].equals(plain.nodes["node_id"]) and dup.edges.equals(plain.edges)
