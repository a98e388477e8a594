"""Embedding cache: a rerun embeds nothing; a one-text change embeds one text."""

import numpy as np

from pipeline.stages.embed import (
    LENGTH_STEP,
    EmbeddingCache,
    HashingEmbedder,
    SentenceEncoder,
    embed_cached,
)


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


WORDS = "the cat sat on a mat and we had tea in my house by an old red door at noon".split()


def _texts_by_tokens(counts, seed=0):
    """One text per token count (every word above is one MiniLM token; [CLS] and [SEP] add two)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, max(n - 2, 0))) for n in counts]


def test_a_texts_vector_does_not_depend_on_its_batch():
    """Issue 26 item 4: sentence-transformers pads a batch to its longest text, and the padded
    length changes a text's float bits (an edited turn re-encoded in a batch of 5 got other bits
    than among thousands). Token counts on both sides of LENGTH_STEP edges and of the 256-token
    limit (truncated): each text alone, in the whole list, and among texts of its own padded
    length (the only ones it shares a batch with) at other rows and row counts: bit-identical."""
    enc = SentenceEncoder(batch_size=8)
    edges = range(LENGTH_STEP, 257, 4 * LENGTH_STEP)  # 8, 40, ..., 232 and the 256-token limit
    counts = [2, 3] + [n for e in [*edges, 256] for n in (e - 1, e, e + 1) if n <= 256]
    texts = _texts_by_tokens([*counts, 600])
    tok = enc._load("cpu").tokenizer
    got = [len(tok(t, truncation=True, max_length=256)["input_ids"]) for t in texts]
    assert got == [*counts, 256]  # the lengths the test means to cross
    whole = enc.encode(texts)
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-6)
    for i, t in enumerate(texts):
        assert enc.encode([t])[0].tobytes() == whole[i].tobytes(), got[i]
    for i in (counts.index(9), counts.index(136), len(texts) - 1):
        crowd = _texts_by_tokens([got[i]] * 9, seed=i)  # 10 texts of one length: 7 + 3 per batch
        for row in (0, 9):
            vecs = enc.encode([*crowd[:row], texts[i], *crowd[row:]])
            assert vecs[row].tobytes() == whole[i].tobytes(), (got[i], row)


def test_the_default_batch_shape_too():
    """The configured batch_size 64: a text alone (2 rows) and among 64 texts of its padded
    length (batches of 64 and 2 rows)."""
    enc = SentenceEncoder()
    texts = _texts_by_tokens([40, 7] + [38] * 63, seed=3)
    whole = enc.encode(texts)
    for i in (0, 1, 2, 50, 64):
        assert enc.encode([texts[i]])[0].tobytes() == whole[i].tobytes()


def test_cache_id_names_the_batch_shape():
    """Everything that shapes a text's batch is in the embedding cache key."""
    a, b = SentenceEncoder(), SentenceEncoder(batch_size=8)
    assert a.cache_id != b.cache_id
    assert '"batch_size": 64' in a.cache_id and f'"length_step": {LENGTH_STEP}' in a.cache_id
