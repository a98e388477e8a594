"""Every per-query top-k of the pipeline, each with the tie rule its callers rely on.

- ``topk_long`` / ``topk_sparse`` / ``topk_dense``: long (query, item, score) triples on the host,
  ties by ascending item index, ranks from 1 (candidate channels, novelty); ``topk_sparse`` cuts
  long rows by ``topk_entry_mask`` first.
- ``topk_by_row``: the best k of a dense (nq, b) score block with column ids (the blocked dense scan
  and its running merge).
- ``topk_abs_mask``: a dense (N, B) mask of each column's k largest |x| (expand, the diffusion stage's
  ``keep``); xp-generic.
- ``topk_entry_mask``: a mask over (query, node, |E|) entries of a sparse matrix, exact without
  sorting every entry (PEDSA's frontier, ``topk_sparse``'s long rows); xp-generic.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.backend import bincount, namespaces

KEY_BITS = 63  # a non-negative int64 sort key


def bit_width(a: np.ndarray) -> int:
    """Bits that hold every value of the non-negative integer array ``a``."""
    return int(a.max(initial=0)).bit_length()


def _desc_key(score: np.ndarray) -> np.ndarray:
    """float32 scores → int64 keys that ascend as the scores descend, equal where the scores
    compare equal (−0.0 is folded into +0.0 first)."""
    u = (score + np.float32(0.0)).view(np.uint32)
    asc = np.where(u >> 31, ~u, u | np.uint32(0x80000000))  # the IEEE order as unsigned integers
    return (np.uint32(0xFFFFFFFF) - asc).astype(np.int64)


def lex_order(qi: np.ndarray, score: np.ndarray, di: np.ndarray) -> np.ndarray:
    """``np.lexsort((di, -score, qi))``: by query, score descending, item; ties in all three keep
    their input order. For non-negative integer ids and float32 scores without NaN it is one or two
    stable sorts of packed 64-bit keys (``lexsort``'s three indirect passes cost ~15× more on
    millions of rows); otherwise ``lexsort`` itself."""
    ints = qi.dtype.kind in "iu" and di.dtype.kind in "iu"
    if not (
        ints
        and score.dtype == np.float32
        and len(qi)
        and qi.min() >= 0
        and di.min() >= 0
        and not np.isnan(score).any()
    ):
        return np.lexsort((di, -score, qi))
    bq, bd = bit_width(qi), bit_width(di)
    if bq + 32 > KEY_BITS:
        return np.lexsort((di, -score, qi))
    head = (qi.astype(np.int64) << 32) | _desc_key(score)
    if bq + 32 + bd <= KEY_BITS:
        return np.argsort((head << bd) | di.astype(np.int64), kind="stable")
    by_item = np.argsort(di, kind="stable")  # then a stable sort by (query, score) keeps item order
    return by_item[np.argsort(head[by_item], kind="stable")]


def pack_ints(*cols: np.ndarray) -> tuple[np.ndarray, list[int], list[int]] | None:
    """Integer columns packed into one int64 key, the first column in the highest bits, each as
    its offset from its minimum: (key, each column's bit width, each column's minimum), whose
    ascending order is the columns' lexicographic order; None when they do not fit in
    ``KEY_BITS`` (or a column is not of integers, or there are no rows)."""
    if not len(cols[0]) or any(c.dtype.kind not in "iu" for c in cols):
        return None
    los = [int(c.min()) for c in cols]
    widths = [(int(c.max()) - lo).bit_length() for c, lo in zip(cols, los)]
    if sum(widths) > KEY_BITS:
        return None
    key = np.zeros(len(cols[0]), np.int64)
    for c, lo, w in zip(cols, los, widths):
        off = (c.astype(np.uint64) - np.uint64(lo)) if c.dtype.kind == "u" else c - np.int64(lo)
        key = (key << w) | off.astype(np.int64)
    return key, widths, los


def int_order(*cols: np.ndarray) -> np.ndarray:
    """``np.lexsort(cols[::-1])`` (the first column most significant; ties in input order) of
    integer columns, the same permutation by the cheapest sort that gives it: none when the
    packed key (:func:`pack_ints`) already ascends; numpy's radix sort when it spans 16 bits; one
    plain sort of ``key << b | position`` decoded when that fits in ``KEY_BITS``; else a stable
    sort of the key, or ``lexsort`` itself when the columns do not pack."""
    n = len(cols[0])
    packed = pack_ints(*cols) if n > 1 else None
    if packed is None:
        return np.arange(n) if n < 2 else np.lexsort(cols[::-1])
    key, bk = packed[0], sum(packed[1])
    if bool((key[1:] >= key[:-1]).all()):
        return np.arange(n)
    if bk <= 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    bp = (n - 1).bit_length()
    if bk + bp > KEY_BITS:
        return np.argsort(key, kind="stable")
    # the position in the low bits: a plain sort of distinct values is the stable order
    return np.sort((key << bp) | np.arange(n, dtype=np.int64)) & ((1 << bp) - 1)


def topk_long(qi: np.ndarray, di: np.ndarray, score: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Keep each query's ``k`` best items. Returns (qi, di, score, rank) sorted by query then rank.

    Ties are broken by ascending item index; ranks are 1-based. Where (query, score, item) packs
    into one int64 (:func:`_packed`), the keys themselves are sorted (no permutation, no gathers)
    and decoded: the triples of :func:`lex_order`'s order, whose ties in all three are equal
    triples anyway."""
    packed = _packed(qi, score, di)
    if packed is not None:
        key, bd = packed
        key = np.sort(key)
        q = key >> (32 + bd)
        first = _firsts(q)
        rank = np.arange(len(q)) - first + 1
        keep = rank <= k
        key = key[keep]
        return (
            q[keep].astype(qi.dtype, copy=False),
            (key & ((1 << bd) - 1)).astype(di.dtype, copy=False),
            _from_desc_key((key >> bd) & 0xFFFFFFFF),
            rank[keep].astype(np.int32),
        )
    order = lex_order(qi, score, di)
    qi, di, score = qi[order], di[order], score[order]
    rank = np.arange(len(qi)) - _firsts(qi) + 1
    keep = rank <= k
    return qi[keep], di[keep], score[keep], rank[keep].astype(np.int32)


def _firsts(q: np.ndarray) -> np.ndarray:
    """For each entry of the grouped ``q``, the position of its group's first entry."""
    starts = np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1] if len(q) else np.zeros(0, np.int64)
    return np.repeat(starts, np.diff(np.r_[starts, len(q)]))


def _packed(qi: np.ndarray, score: np.ndarray, di: np.ndarray):
    """``(key, item bits)``: the distinct-order int64 keys ``query << (32 + b) | desc(score) << b |
    item`` whose ascending order is :func:`lex_order`'s, or None where they do not fit or would
    not decode to the same triples (non-integer or negative ids, scores not float32, NaN, −0.0,
    which the key folds into +0.0)."""
    if not (
        len(qi)
        and qi.dtype.kind in "iu"
        and di.dtype.kind in "iu"
        and score.dtype == np.float32
        and qi.min() >= 0
        and di.min() >= 0
    ):
        return None
    bd = bit_width(di)
    if bit_width(qi) + 32 + bd > KEY_BITS or np.isnan(score).any():
        return None
    if (score.view(np.uint32) == np.uint32(0x80000000)).any():
        return None
    key = (qi.astype(np.int64) << (32 + bd)) | (_desc_key(score) << bd)
    return key | di.astype(np.int64), bd


def _from_desc_key(key: np.ndarray) -> np.ndarray:
    """The float32 scores of :func:`_desc_key`'s keys (int64 in [0, 2**32)); −0.0 comes back +0.0."""
    asc = (np.uint32(0xFFFFFFFF) - key.astype(np.uint32)).astype(np.uint32)
    u = np.where(asc >> 31, asc & np.uint32(0x7FFFFFFF), ~asc)
    return u.astype(np.uint32).view(np.float32)


def topk_sparse(r, k: int, positive_only: bool = True) -> tuple[np.ndarray, ...]:
    """Top-k per row of a sparse (nq, n) score matrix (scipy or cupyx) → long triples on the host.

    With ``positive_only`` (scores > 0, as float32), rows holding more than ``k`` entries are first
    cut to their ``k`` best by :func:`topk_entry_mask` (the same tie rule, no sort of every entry),
    so :func:`topk_long` sorts what it keeps: the same triples as sorting them all."""
    if getattr(r, "format", None) == "csr" and namespaces(r.data)[0] is np:
        row = np.repeat(np.arange(r.shape[0], dtype=np.int64), np.diff(r.indptr))
        col, data = r.indices, r.data
    else:
        coo = r.tocoo()
        row, col, data = (
            np.asarray(getattr(a, "get", lambda: a)()) for a in (coo.row, coo.col, coo.data)
        )
    if positive_only:
        m = data > 0
        if not m.all():
            row, col, data = row[m], col[m], data[m]
    data = data.astype(np.float32, copy=False)
    if positive_only and k > 0 and len(row) > k:
        keep = topk_entry_mask(np, row, col, data, k, r.shape[0])
        row, col, data = row[keep], col[keep], data[keep]
    return topk_long(row.astype(np.int64, copy=False), col.astype(np.int64, copy=False), data, k)


def topk_dense(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Re-rank (nq, c) search results (ids −1 = padding) with the tie rule → long triples."""
    nq, c = ids.shape
    qi = np.repeat(np.arange(nq, dtype=np.int64), c)
    di, sc = ids.reshape(-1).astype(np.int64), scores.reshape(-1).astype(np.float32)
    m = di >= 0
    return topk_long(qi[m], di[m], sc[m], k)


def topk_by_row(s: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best k of scores ``s`` (nq, b) whose columns are ids ``ids``, ordered by score desc, id asc.

    The cut is an ``argpartition``: which of several entries tied at the k-th score stay is not
    ruled by id (unlike ``topk_long``), in exchange for no full sort of the block."""
    ids = np.broadcast_to(ids, s.shape)  # a view when ids is one row
    if s.shape[1] > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s, ids = np.take_along_axis(s, part, 1), np.take_along_axis(ids, part, 1)
    order = np.lexsort((ids, -s), axis=1)
    return np.take_along_axis(s, order, 1), np.take_along_axis(ids, order, 1)


def topk_abs_mask(x, k):
    """Boolean (N, B) mask keeping each column's k largest |x| (ties: lower row index first), x≠0.

    ``k`` is an int, or a (B,) integer array giving each column its own k; k ≤ 0 keeps nothing.
    """
    xp, _ = namespaces(x)
    n, b = x.shape
    a = xp.abs(x)
    kk = xp.broadcast_to(xp.asarray(k), (b,))
    if n == 0 or b == 0:
        return a > 0
    top = min(int(kk.max()), n)
    if top <= 0:
        return xp.zeros(a.shape, bool)
    nonzero = a > 0
    if bool((nonzero.sum(axis=0) <= kk).all()):  # no column holds more than its k: keep them all
        return nonzero
    srt = -xp.sort(xp.partition(-a, top - 1, axis=0)[:top], axis=0)  # each column's top largest |x|
    thr = srt[xp.clip(kk - 1, 0, top - 1), xp.arange(b)]  # k-th largest (the smallest when k ≥ n)
    thr = xp.where(kk > 0, thr, xp.inf)
    gt = a > thr
    eq = a == thr
    need = kk - gt.sum(axis=0)
    keep_eq = eq & (xp.cumsum(eq, axis=0) <= need)
    return (gt | keep_eq) & (a > 0)


def _bins(xp, a):
    """Monotone histogram bin of every |E| (0 = largest): the float's exponent and top 3 mantissa
    bits below the largest, at most ``nb - 1``. Returns (bins, nb, to_value) where ``to_value``
    maps a bin to the smallest value it holds (None for float widths other than 32/64 bits)."""
    nb = 256
    shift = {4: 20, 8: 49}.get(a.dtype.itemsize)
    if shift is None:  # one bin, i.e. a full sort
        return xp.zeros(a.shape, xp.int64), nb, None
    ity = xp.int32 if a.dtype.itemsize == 4 else xp.int64
    g = a.view(ity) >> shift
    gmax = int(g.max())
    bins = xp.minimum(gmax - g, nb - 1).astype(xp.int64)

    def to_value(t):  # bins ≤ t ⇔ value ≥ to_value(t); the last bin holds everything down to 0
        low = ((gmax - xp.minimum(t, nb - 1)) << shift).astype(ity).view(a.dtype)
        return xp.where(t >= nb - 1, 0, low)

    return bins, nb, to_value


def _boundary(xp, q, bins, nb: int, k: int, b: int):
    """Per row: the bin holding its k-th largest entry (``nb`` when the row has at most k) and how
    many entries it still needs from that bin."""
    hist = bincount(q * nb + bins, minlength=b * nb).reshape(b, nb)
    cum = xp.cumsum(hist, axis=1)
    tb = xp.where(cum[:, -1] > k, xp.argmax(cum >= k, axis=1), nb)
    t = xp.minimum(tb, nb - 1)
    r = xp.arange(b)
    return tb, k - (cum[r, t] - hist[r, t])


def topk_entry_mask(xp, q, i, a, k: int, b: int, cnt=None):
    """Boolean mask over entries (query ``q``, node ``i``, |E| ``a``; any order) keeping each
    query's ``k`` largest ``a``, ties by lower node. ``cnt``: entries per query, if known.

    Exact, without sorting every entry: a histogram over monotone bins of ``a`` finds each query's
    boundary bin and only that bin is sorted. Long rows are first cut to the entries at or above
    a threshold taken from every 8th entry, kept only where at least k entries pass it.
    """
    if cnt is None:
        cnt = bincount(q, minlength=b)
    over_row = cnt > k
    if not bool(over_row.any()):
        return xp.ones(q.shape, bool)
    if bool(((cnt > 0) & ~over_row).any()):  # rank only the entries of the rows that need pruning
        sub = xp.nonzero(over_row[q])[0]
        slot = xp.cumsum(over_row) - 1  # the pruned rows, renumbered 0…
        keep = xp.ones(q.shape, bool)
        keep[sub] = topk_entry_mask(xp, slot[q[sub]], i[sub], a[sub], k, int(over_row.sum()))
        return keep
    q = q.astype(xp.int64)
    if q.size > 32 * k * b:  # long rows: a sampled threshold first
        step = 8
        sq, sa = q[::step], a[::step]
        sbins, nb, to_value = _bins(xp, sa)
        if to_value is not None:
            tb, _ = _boundary(xp, sq, sbins, nb, 2 * (k // step) + 4, b)
            thr = to_value(tb)
            cand = a >= thr[q]
            short = bincount(q[cand], minlength=b) < k  # threshold too high: keep the whole row
            if bool(short.any()):
                cand |= short[q]
            cand = xp.nonzero(cand)[0]
            if cand.size < q.size:  # else (the threshold cuts nothing) the histogram below
                keep = xp.zeros(q.shape, bool)
                keep[cand] = topk_entry_mask(xp, q[cand], i[cand], a[cand], k, b)
                return keep
    bins, nb, _ = _bins(xp, a)
    tb, need = _boundary(xp, q, bins, nb, k, b)
    bt = tb[q]
    keep = bins < bt
    edge = xp.nonzero(bins == bt)[0]
    if edge.size:
        qe = q[edge]
        order = xp.lexsort(
            xp.stack(
                [i[edge].astype(xp.float64), -a[edge].astype(xp.float64), qe.astype(xp.float64)]
            )
        )
        qs = qe[order]
        rank = xp.arange(edge.size) - xp.searchsorted(qs, qs, side="left")
        keep[edge[order[rank < need[qs]]]] = True
    return keep
