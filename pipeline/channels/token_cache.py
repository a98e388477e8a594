"""The nodes' field tokens on disk: ``lexical.tokenize_fields`` of a large node table, and the
vocabulary it leaves in its tokenizer, read back by a later run over the same texts.

Tokenising is corpus-side work that does not depend on the queries (1M synthetic nodes: ~5 s, the
largest corpus-side step; reading the file back: ~0.4 s), so a run with other queries over the
same nodes (another query file, held-out halves, a sweep whose candidates change) need not redo
it. Only a group of at least ``MIN_NODES`` nodes is cached: smaller ones tokenise in less time than
a file costs.

The key is SHA-256 over the exact ordered bytes the tokens depend on: the format, the code version
(``version.code_version``: every pipeline source file and the versions of bm25s, PyStemmer, jieba,
polars …), the Python version (its ``re`` splits non-ASCII text), the tokenizer settings and its
resolved stopword list, and every field's name and texts in row order (each text's UTF-8 length,
then all their bytes). One file per key, ``<cache_dir>/tokens/<key>.npz``: numpy arrays only
(``allow_pickle=False``; strings as UTF-8 bytes and lengths), written atomically; the folder keeps
the ``KEEP_FILES`` most recently used. A file that does not read back whole (truncated, another
layout) is recomputed and written again.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline import io, version
from pipeline.channels.lexical import Tokens, tokenize_fields

MIN_NODES = 50_000  # nodes of a group from which its field tokens are cached on disk
KEEP_FILES = (
    8  # token files kept in a cache folder, the most recently used (1M nodes: ~330 MB each)
)
FORMAT = "tokens/1"
STATE = ("word_to_id", "stem_to_sid")  # the tokenizer's str → id dicts, in insertion order


def key(settings: tuple, tokenizer, fields: dict[str, list[str]]) -> str:
    """SHA-256 (hex) of everything :func:`lexical.tokenize_fields` reads (module docstring):
    ``settings`` are the caller's tokenizer settings (``lexical.make_tokenizer``'s arguments and
    ``cjk_set``), ``tokenizer`` gives its resolved stopword list."""
    h = hashlib.sha256()
    stop = list(tokenizer.stopwords or ())
    h.update(repr((FORMAT, version.code_version(), sys.version, settings, stop)).encode())
    for name, texts in fields.items():
        col = pl.Series(texts, dtype=pl.String).fill_null("")
        h.update(f"\0{name}\0{len(col)}\0".encode())
        h.update(col.str.len_bytes().to_numpy().astype(np.int64).tobytes())
        h.update(col.str.join("").item().encode())
    return h.hexdigest()


def tokenised(
    tokenizer, fields: dict[str, list[str]], settings: tuple, root: Path | None
) -> Tokens:
    """``tokenize_fields(tokenizer, fields, cjk_set)`` (``cjk_set`` the last of ``settings``),
    read from ``root`` when an earlier run wrote it (``tokenizer`` then gets the vocabulary that
    run's tokenizer was left with), else computed and, for ``MIN_NODES`` nodes or more, written
    there. ``root`` None: no cache."""
    cjk_set = settings[-1]
    n = len(next(iter(fields.values()), []))
    if root is None or n < MIN_NODES:
        return tokenize_fields(tokenizer, fields, cjk_set)
    path = Path(root) / f"{key(settings, tokenizer, fields)}.npz"
    got = _read(path, tokenizer, list(fields), n)
    if got is not None:
        return got
    tokens = tokenize_fields(tokenizer, fields, cjk_set)
    io.atomic_write(path, lambda fh: np.savez(fh, **_arrays(tokens, tokenizer)))
    _evict(path.parent)
    return tokens


def _evict(root: Path) -> None:
    """All but the ``KEEP_FILES`` most recently used token files of ``root`` removed (a nightly
    run over an edited corpus writes a new one each night). A run reading one that goes meanwhile
    keeps what it opened, or finds none and tokenises."""
    files = sorted(root.glob("*.npz"), key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)
    for p in files[KEEP_FILES:]:
        p.unlink(missing_ok=True)


def _pack(words) -> tuple[np.ndarray, np.ndarray]:
    """Strings as (their UTF-8 bytes end to end, each one's byte length)."""
    b = [w.encode() for w in words]
    return np.frombuffer(b"".join(b), np.uint8), np.fromiter(map(len, b), np.int64, len(b))


def _unpack(data: np.ndarray, lens: np.ndarray) -> list[str]:
    raw, ends = data.tobytes(), np.cumsum(lens).tolist()
    return [raw[s:e].decode() for s, e in zip([0, *ends[:-1]], ends)]


def _arrays(tokens: Tokens, tokenizer) -> dict[str, np.ndarray]:
    out = {}
    for i, (name, m) in enumerate(tokens.fields.items()):
        out |= {f"f{i}_data": m.data, f"f{i}_indices": m.indices, f"f{i}_indptr": m.indptr}
        out[f"f{i}_name"] = _pack([name])[0]
    out["shape"] = np.array(next(iter(tokens.fields.values())).shape, np.int64)
    for i, a in enumerate(tokens.places or ()):
        out[f"place{i}"] = a
    out["vocab_words"], out["vocab_lens"] = _pack(tokens.vocab)
    out["vocab_ids"] = np.fromiter(tokens.vocab.values(), np.int64, len(tokens.vocab))
    for name in STATE:
        d = getattr(tokenizer, name)
        out[f"{name}_words"], out[f"{name}_lens"] = _pack(d)
        out[f"{name}_ids"] = np.fromiter(d.values(), np.int64, len(d))
    stems = tokenizer.word_to_stem
    out["stem_words"], out["stem_lens"] = _pack(stems)
    out["stem_of"], out["stem_of_lens"] = _pack(stems.values())
    return out


def _words(z, name: str) -> list[str]:
    return _unpack(z[f"{name}_words"], z[f"{name}_lens"])


def _read(path: Path, tokenizer, names: list[str], n: int) -> Tokens | None:
    """The cached tokens of ``path`` with ``tokenizer``'s dicts set from it, or None when there is
    no such file or it does not read back whole as ``names``' fields over ``n`` rows."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            shape = tuple(int(x) for x in z["shape"])
            if shape[0] != n:
                return None
            fields = {}
            for i, name in enumerate(names):
                if bytes(z[f"f{i}_name"]).decode() != name:
                    return None
                parts = (z[f"f{i}_data"], z[f"f{i}_indices"], z[f"f{i}_indptr"])
                fields[name] = sp.csr_matrix(parts, shape=shape)
            places = tuple(z[f"place{i}"] for i in range(3)) if "place0" in z.files else None
            vocab = dict(zip(_words(z, "vocab"), z["vocab_ids"].tolist()))
            state = {s: dict(zip(_words(z, s), z[f"{s}_ids"].tolist())) for s in STATE}
            stems = dict(zip(_words(z, "stem"), _unpack(z["stem_of"], z["stem_of_lens"])))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError):
        return None  # not whole: recomputed, and written again
    for name, d in state.items():
        setattr(tokenizer, name, d)
    tokenizer.word_to_stem = stems
    path.touch()  # used now: the last file :func:`_evict` removes
    return Tokens(fields, vocab, places)
