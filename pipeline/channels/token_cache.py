"""The nodes' field tokens on disk: ``lexical.tokenize_fields`` of a large node table, and the
vocabulary it leaves in its tokenizer, read back by a later run over the same texts.

Tokenising is corpus-side work that does not depend on the queries (1M synthetic nodes: ~5 s, the
largest corpus-side step; reading the file back, its key included: ~0.6 s), so a run with other queries over the
same nodes (another query file, held-out halves, a sweep whose candidates change) need not redo
it. Keys, files and the folder's bound are ``pipeline.core.npzcache``'s: the key covers the tokenizer
settings and its resolved stopword list, and every field's name and texts in row order; a group
of fewer than ``npzcache.MIN_ROWS`` nodes is tokenised each time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from pipeline.channels.lexical import Tokens, tokenize_fields
from pipeline.channels.segvocab import POS_BITS
from pipeline.core import npzcache

FORMAT = "tokens/2"
STATE = ("word_to_id", "stem_to_sid")  # the tokenizer's str → id dicts, in insertion order


def key(settings: tuple, tokenizer, fields: dict[str, list[str]]) -> str:
    """SHA-256 (hex) of everything :func:`lexical.tokenize_fields` reads: ``settings`` are the
    caller's tokenizer settings (``lexical.make_tokenizer``'s arguments and ``cjk_set``),
    ``tokenizer`` gives its resolved stopword list."""
    h = npzcache.start(FORMAT, (settings, list(tokenizer.stopwords or ())))
    for name, texts in fields.items():
        npzcache.digest(h, name, texts)
    return h.hexdigest()


def tokenised(
    tokenizer, fields: dict[str, list[str]], settings: tuple, root: Path | None
) -> Tokens:
    """``tokenize_fields(tokenizer, fields, cjk_set)`` (``cjk_set`` the last of ``settings``),
    read from ``root`` when an earlier run wrote it (``tokenizer`` then gets the vocabulary that
    run's tokenizer was left with), else computed and, for ``npzcache.MIN_ROWS`` nodes or more,
    written there. ``root`` None: no cache."""
    cjk_set = settings[-1]
    n = len(next(iter(fields.values()), []))
    if root is None or n < npzcache.MIN_ROWS:
        return tokenize_fields(tokenizer, fields, cjk_set)
    path = Path(root) / f"{key(settings, tokenizer, fields)}.npz"
    got = _tokens(npzcache.read(path), tokenizer, list(fields), n)
    if got is not None:
        return got
    tokens = tokenize_fields(tokenizer, fields, cjk_set)
    npzcache.write(path, _arrays(tokens, tokenizer))
    return tokens


def _arrays(tokens: Tokens, tokenizer) -> dict[str, np.ndarray]:
    out = {}
    for i, (name, m) in enumerate(tokens.fields.items()):
        out |= {f"f{i}_data": m.data, f"f{i}_indices": m.indices, f"f{i}_indptr": m.indptr}
        out[f"f{i}_name"] = npzcache.pack([name])[0]
    out["shape"] = np.array(next(iter(tokens.fields.values())).shape, np.int64)
    if tokens.places is not None:  # (doc, term, key): 13 bytes a token instead of 24
        doc, term, key = tokens.places
        out["place_doc"], out["place_term"] = _narrow(doc), _narrow(term)
        field = key >> POS_BITS  # the field's index: one of a few
        out["place_field"] = field.astype(np.uint8) if field.max(initial=0) < 256 else field
        out["place_pos"] = (key & ((1 << POS_BITS) - 1)).astype(np.uint32)
    for name, d in (("vocab", tokens.vocab), *((s, getattr(tokenizer, s)) for s in STATE)):
        out[f"{name}_words"], out[f"{name}_lens"] = npzcache.pack(d)
        out[f"{name}_ids"] = np.fromiter(d.values(), np.int64, len(d))
    stems = tokenizer.word_to_stem
    out["stem_words"], out["stem_lens"] = npzcache.pack(stems)
    out["stem_of"], out["stem_of_lens"] = npzcache.pack(stems.values())
    return out


def _narrow(a: np.ndarray) -> np.ndarray:
    """An int64 array of non-negative values as int32 when they fit (read back as int64)."""
    return a.astype(np.int32) if not len(a) or (a.min() >= 0 and a.max() < 1 << 31) else a


def _ids(z: dict, name: str) -> dict[str, int]:
    return dict(
        zip(npzcache.unpack(z[f"{name}_words"], z[f"{name}_lens"]), z[f"{name}_ids"].tolist())
    )


def _tokens(z: dict | None, tokenizer, names: list[str], n: int) -> Tokens | None:
    """The tokens of the arrays ``z`` (:func:`_arrays`), ``tokenizer``'s dicts set from them, or
    None when there are none or they are not ``names``' fields over ``n`` rows."""
    if z is None:
        return None
    try:
        shape = tuple(int(x) for x in z["shape"])
        if shape[0] != n:
            return None
        fields = {}
        for i, name in enumerate(names):
            if bytes(z[f"f{i}_name"]).decode() != name:
                return None
            parts = (z[f"f{i}_data"], z[f"f{i}_indices"], z[f"f{i}_indptr"])
            fields[name] = sp.csr_matrix(parts, shape=shape)
        places = None
        if "place_doc" in z:
            key = (z["place_field"].astype(np.int64) << POS_BITS) | z["place_pos"]
            places = (z["place_doc"].astype(np.int64), z["place_term"].astype(np.int64), key)
        vocab, state = _ids(z, "vocab"), {s: _ids(z, s) for s in STATE}
        stem_of = npzcache.unpack(z["stem_of"], z["stem_of_lens"])
        stems = dict(zip(npzcache.unpack(z["stem_words"], z["stem_lens"]), stem_of))
    except (KeyError, ValueError, UnicodeDecodeError):
        return None  # another layout: recomputed, and written again
    for name, d in state.items():
        setattr(tokenizer, name, d)
    tokenizer.word_to_stem = stems
    return Tokens(fields, vocab, places)
