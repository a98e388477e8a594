"""Embedding cache: a rerun embeds nothing; a one-text change embeds one text."""

import json

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
    """Everything that shapes a text's batch is in the embedding cache key, per device."""
    a, b = SentenceEncoder(), SentenceEncoder(batch_size=8)
    assert a.cache_id("cpu") != b.cache_id("cpu")
    cpu, cuda = json.loads(a.cache_id("cpu")), json.loads(a.cache_id("cuda"))
    assert (cpu["batch_size"], cpu["device"], cpu["length_step"]) == (64, "cpu", LENGTH_STEP)
    assert (cuda["batch_size"], cuda["device"]) == (512, "cuda")  # conf/embed/minilm.yaml's
    assert {k for k in cpu if cpu[k] != cuda[k]} == {"batch_size", "device"}
    same_rows = json.loads(SentenceEncoder(device_batch_size=None).cache_id("cuda"))
    assert (same_rows["batch_size"], same_rows["device"]) == (64, "cuda")  # other kernels still


def test_rows_per_device():
    """batch_size on the CPU; device_batch_size elsewhere, batch_size when unset; at least 2."""
    assert SentenceEncoder(batch_size=8, device_batch_size=256).rows("cpu") == 8
    assert SentenceEncoder(batch_size=8, device_batch_size=256).rows("cuda") == 256
    assert SentenceEncoder(batch_size=8, device_batch_size=None).rows("cuda") == 8
    assert SentenceEncoder(batch_size=1, device_batch_size=1).rows("cuda") == 2


def test_encode_fills_the_devices_batch(monkeypatch):
    """Off the CPU every forward pass has ``device_batch_size`` rows. Run here on ``cpu:0``, a
    device string other than ``cpu`` that torch runs on this machine: 7 texts of one padded width
    in batches of 5 rows (4 texts and a filler), and their vectors are the batch-of-64 ones to
    float rounding (another batch shape: other bits allowed, not other vectors)."""
    enc = SentenceEncoder(batch_size=64, device_batch_size=5)
    texts = _texts_by_tokens([12] * 7, seed=5)
    model = enc._load("cpu:0")
    shapes, real = [], model.forward
    monkeypatch.setattr(
        model, "forward", lambda f: shapes.append(tuple(f["input_ids"].shape)) or real(f)
    )
    got = enc.encode(texts, "cpu:0")
    assert shapes == [(5, 16), (5, 16)]
    ref = SentenceEncoder().encode(texts, "cpu")
    assert np.abs(got - ref).max() < 1e-5


def test_a_device_never_reads_another_devices_vectors(tmp_path):
    """A vector embedded on one device is not served to a run on another: the cache key names
    the device, so a cpu run after a cuda run (or the reverse) embeds its own."""

    class PerDevice(CountingEncoder):
        def cache_id(self, device="cpu"):
            return f"{super().cache_id(device)}|{device}"

    enc = PerDevice()
    cache = EmbeddingCache(tmp_path / "e.sqlite", enc.dim)
    texts = ["alpha beta", "gamma"]
    assert embed_cached(enc, texts, cache, "cuda")[1] == 2
    assert embed_cached(enc, texts, cache, "cpu")[1] == 2
    assert embed_cached(enc, texts, cache, "cpu")[1] == 0
    assert embed_cached(enc, texts, cache, "cuda")[1] == 0
