"""Embedding cache: a rerun embeds nothing; a one-text change embeds one text."""

import numpy as np

from pipeline.stages.embed import EmbeddingCache, HashingEmbedder, SentenceEncoder, embed_cached


class CountingEncoder(HashingEmbedder):
    def __init__(self):
        super().__init__(dim=16)
        self.seen = []

    def encode(self, texts, device="cpu"):
        self.seen.append(list(texts))
        return super().encode(texts, device)


def test_cache_reuses_and_embeds_only_changes(tmp_path):
    enc = CountingEncoder()
    cache = EmbeddingCache(tmp_path / "e.sqlite", enc.dim)
    texts = ["alpha beta", "gamma", "alpha beta", "delta"]
    a, n = embed_cached(enc, texts, cache, "cpu")
    assert n == 3 and enc.seen == [["alpha beta", "gamma", "delta"]]
    b, n = embed_cached(enc, texts, cache, "cpu")
    assert n == 0 and np.array_equal(a, b)
    c, n = embed_cached(enc, ["alpha beta", "gamma!", "delta"], cache, "cpu")
    assert n == 1 and enc.seen[-1] == ["gamma!"]
    assert np.array_equal(c[0], a[0]) and np.allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-6)


def test_minilm_loads_offline_and_ranks_paraphrase_first():
    enc = SentenceEncoder()
    x = enc.encode(
        [
            "How do I reset my password?",
            "Steps to change a forgotten login password",
            "The weather in Lisbon is sunny",
        ],
        "cpu",
    )
    assert x.shape == (3, 384) and x.dtype == np.float32
    assert x[0] @ x[1] > x[0] @ x[2] + 0.3
