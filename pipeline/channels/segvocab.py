"""BM25 term columns per segment: several scopes' documents in one matrix, each scope with its own
vocabulary, so one sparse product scores them all and no statistic crosses a scope.

A scope's own tokenisation (``lexical.tokenize_fields`` over its documents alone) numbers terms in
order of first appearance: field by field (title, tags, body, code), document by document, token by
token. Sums over a query's terms run in that column order, so the scores' last bits depend on it.
:func:`layout` gives every (segment, term) its own column, numbered within the segment in exactly
that order, from a tokenisation of all documents at once (``Tokens.places``: where each
document's tokens sit). A segment's block of columns is then the matrix its own tokenisation would
give, and the blocks of different segments share no column (a block-diagonal layout).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from pipeline.ops.sparse_entries import spans
from pipeline.ops.topk import int_order, pack_ints

POS_BITS = 32  # a first-appearance key: field << POS_BITS | token position in that field's text
DENSE_SPAN = 2  # (segment, term) codes per token entry up to which a layout's minimum runs dense


def token_keys(flat: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc, term, key) of every token, grouped by document (ascending; within one, field by
    field in token order): ``key`` = field << POS_BITS | the token's position in that field's
    text. ``flat``: per field, in order, the (document, position, term) of its tokens, documents
    ascending within a field, so the fields are merged by one stable sort of a few runs."""
    parts = [
        (doc, term, (np.int64(f) << POS_BITS) | np.minimum(pos, (1 << POS_BITS) - 1))
        for f, (doc, pos, term) in enumerate(flat.values())
    ]
    doc, term, key = (np.concatenate(a) for a in zip(*parts))
    if sum(len(p[0]) > 0 for p in parts) > 1:
        order = np.argsort(doc, kind="stable")  # timsort: one merge of the fields' sorted runs
        doc, term, key = doc[order], term[order], key[order]
    return doc, term, key


@dataclass
class Layout:
    """Where each (segment, term) lives: sorted ``seg * n_terms + term`` codes and their columns."""

    codes: np.ndarray
    cols: np.ndarray
    n_terms: int
    n_cols: int

    def columns(self, seg: np.ndarray, term: np.ndarray) -> np.ndarray:
        """Column of each (segment, term) pair; −1 where the segment's documents lack the term."""
        code = seg.astype(np.int64) * self.n_terms + term
        at = np.minimum(np.searchsorted(self.codes, code), max(len(self.codes) - 1, 0))
        hit = (self.codes[at] == code) if len(self.codes) else np.zeros(len(code), bool)
        return np.where(hit, self.cols[at] if len(self.codes) else -1, -1)


def layout(places: tuple, rows: np.ndarray, seg: np.ndarray, n_terms: int) -> Layout:
    """The columns of the documents ``rows`` (virtual row j is document ``rows[j]`` of segment
    ``seg[j]``; segments contiguous and ascending, rows ascending within one): each segment's terms
    numbered by first appearance (field, then document, then position), segments one after another.
    ``places``: :func:`token_keys` of the tokenisation."""
    doc, term, key = places
    n_docs = max(int(doc.max(initial=-1)), int(rows.max(initial=-1))) + 1
    starts = np.searchsorted(doc, np.arange(n_docs + 1))
    pick = spans(np, starts[rows], starts[rows + 1])
    vrow = np.repeat(np.arange(len(rows)), starts[rows + 1] - starts[rows])
    s, t = seg[vrow].astype(np.int64), term[pick].astype(np.int64)
    # (field, document, position): the order a segment's own tokenisation meets its terms
    f, pos = key[pick] >> POS_BITS, key[pick] & ((1 << POS_BITS) - 1)
    # per (segment, term): its earliest appearance (every tuple is distinct: one term a place)
    codes, s, first_at = _earliest(s, t, n_terms, f, vrow, pos)
    order = int_order(s, *first_at)  # within a segment: by first appearance
    cols = np.empty(len(codes), np.int64)
    cols[order] = np.arange(len(codes))
    return Layout(codes, cols, n_terms, len(codes))


def _earliest(s: np.ndarray, t: np.ndarray, n_terms: int, *when: np.ndarray) -> tuple:
    """(codes, segments, earliest): each distinct (segment, term) pair once, as the ascending
    codes ``s * n_terms + t`` and their segments, with the smallest ``when`` tuple of its entries
    (no two entries share one), as columns that order like it. A group minimum over a dense array
    of codes when they span at most ``DENSE_SPAN`` per entry and ``when`` packs into one int64
    (the earliest as its packed key, :func:`ops.topk.pack_ints`: the same order); else one sort
    of every tuple, each pair's first kept."""
    code = s * n_terms + t
    span = int(code.max(initial=-1)) + 1
    packed = pack_ints(*when) if len(code) and span <= DENSE_SPAN * len(code) else None
    if packed is not None:
        best = np.full(span, np.iinfo(np.int64).max)
        np.minimum.at(best, code, packed[0])
        seen = np.zeros(span, bool)
        seen[code] = True
        codes = np.flatnonzero(seen)
        return codes, codes // n_terms, (best[codes],)
    s, t, *when = _sorted_by(s, t, *when)
    head = np.r_[True, (s[1:] != s[:-1]) | (t[1:] != t[:-1])] if len(s) else s > 0
    return (s * n_terms + t)[head], s[head], tuple(w[head] for w in when)


def _sorted_by(*cols: np.ndarray) -> list[np.ndarray]:
    """The distinct tuples of ``cols`` in ascending order (first column first): one plain sort of
    the packed key (:func:`ops.topk.pack_ints`), decoded, when it fits; else by
    :func:`ops.topk.int_order` (the same order: no two tie)."""
    packed = pack_ints(*cols)
    if packed is None:
        order = int_order(*cols)
        return [c[order] for c in cols]
    key, widths, los = np.sort(packed[0]), packed[1], packed[2]
    out = []
    for w, lo in zip(widths[::-1], los[::-1]):
        out.append((key & ((1 << w) - 1)) + lo)
        key = key >> w
    return out[::-1]


def remap(m: sp.csr_matrix, seg: np.ndarray, lay: Layout) -> sp.csr_matrix:
    """``m`` (rows × terms) with each row's terms moved to its segment's columns (terms its segment
    lacks dropped); canonical (sorted, summed) like the matrices of a segment's own tokenisation."""
    m = m.tocsr()
    row = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    col = lay.columns(seg[row], m.indices.astype(np.int64))
    ok = col >= 0
    out = sp.csr_matrix(
        (m.data[ok], (row[ok], col[ok])), shape=(m.shape[0], max(lay.n_cols, 1)), dtype=m.dtype
    )
    out.sum_duplicates()
    return out
