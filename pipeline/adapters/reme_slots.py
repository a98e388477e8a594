"""The slot layout of ReMe's persisted BM25 index, read **without unpickling** (agentscope-ai/ReMe @
c8e12487 ``components/keyword_index/bm25_index.py``).

ReMe loads ``metadata/keyword_index/bm25_default_regex_<fingerprint>_v1.pkl`` at start and keeps it
when its live documents are the chunk store's (``local_file_store.py::
_sync_keyword_index_from_chunks``), else rebuilds BM25 from the chunks. A loaded index keeps its
lazily deleted slots: their zero scores stay in the array ``_top_k`` partitions, so they change
ReMe's order of equal scores. This module walks the pickle's opcodes with ``pickletools.genops``
(nothing is constructed or run) and reads two fields of the snapshot: ``doc_ids`` (one entry per
slot, deleted ones included) and ``doc_id_to_idx`` (each live chunk id → its slot). Anything it
does not recognise gives None: the chunk store's order is used, as after a rebuild.
"""

from __future__ import annotations

import pickletools
from pathlib import Path

# ReMe's RegexTokenizer with its bundled stopwords (BM25Index._tokenizer_fingerprint @ c8e12487):
# the only index file ReMe's default keyword index loads
PICKLE = "bm25_default_regex_7748e1d5a050_v1.pkl"
STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"}
INTS = {"BININT", "BININT1", "BININT2", "INT", "LONG1"}
GETS = {"BINGET", "LONG_BINGET", "GET"}
PUTS = {"BINPUT", "LONG_BINPUT", "PUT"}


def _tokens(data: bytes):
    """(kind, value) per opcode: ``str`` / ``int`` with memo lookups resolved, else the opcode's
    name (``FRAME`` skipped)."""
    memo: dict[int, object] = {}
    last: object = None
    for op, arg, _pos in pickletools.genops(data):
        n = op.name
        if n == "FRAME":
            continue
        if n == "MEMOIZE":
            memo[len(memo)] = last
            continue
        if n in PUTS:
            memo[arg] = last
            continue
        if n in GETS:
            last = memo.get(arg)
        elif n in STRINGS or n in INTS:
            last = arg
        else:
            last = object()  # a container, a global, a reduction: nothing read from it
            yield n, None
            continue
        yield ("str" if isinstance(last, str) else "int" if isinstance(last, int) else "obj"), last


def _items(toks: list, at: int, opener: str, single: str, batch: str, width: int) -> list | None:
    """The items of the container that opens at ``toks[at]`` (``opener``): ``MARK`` … ``batch``
    groups, or one item and ``single``; ``width`` values per item. None if it is not that."""
    if at >= len(toks) or toks[at][0] != opener:
        return None
    out, i = [], at + 1
    while i < len(toks):
        if toks[i][0] == "MARK":
            j = i + 1
            while j < len(toks) and toks[j][0] in ("str", "int"):
                j += 1
            vals = [v for _k, v in toks[i + 1 : j]]
            if j >= len(toks) or toks[j][0] != batch or len(vals) % width:
                return None
            out += [tuple(vals[k : k + width]) for k in range(0, len(vals), width)]
            i = j + 1
        elif i + width < len(toks) and toks[i + width][0] == single:
            if any(k not in ("str", "int") for k, _v in toks[i : i + width]):
                return None
            out.append(tuple(v for _k, v in toks[i : i + width]))
            i += width + 1
        else:
            return out
    return None


def slot_layout(meta: Path) -> tuple[dict[str, int], int] | None:
    """(live chunk id → its slot, number of slots) of ReMe's persisted BM25 index under ``meta``,
    or None (no such file, or a layout this reader does not recognise)."""
    path = meta / "keyword_index" / PICKLE
    if not path.is_file():
        return None
    try:
        toks = list(_tokens(path.read_bytes()))
    except (ValueError, EOFError):
        return None
    # the snapshot's key: the last occurrence of the name followed by its container (the same
    # word may be a vocabulary term earlier in the file)
    opens = {"doc_ids": "EMPTY_LIST", "doc_id_to_idx": "EMPTY_DICT"}
    at = {
        v: i
        for i, (k, v) in enumerate(toks[:-1])
        if k == "str" and v in opens and toks[i + 1][0] == opens[v]
    }
    if set(at) != set(opens):
        return None
    doc_ids = _items(toks, at["doc_ids"] + 1, "EMPTY_LIST", "APPEND", "APPENDS", 1)
    to_idx = _items(toks, at["doc_id_to_idx"] + 1, "EMPTY_DICT", "SETITEM", "SETITEMS", 2)
    if not doc_ids or not to_idx:
        return None
    n = len(doc_ids)
    slots = {str(k): int(v) for k, v in to_idx}
    ok = all(isinstance(v, int) and 0 <= v < n and doc_ids[v][0] == k for k, v in to_idx)
    return (slots, n) if ok and len(set(slots.values())) == len(slots) else None
