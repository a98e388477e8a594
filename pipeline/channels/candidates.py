"""Candidate generation: dense (FAISS) and lexical (BM25) channels, per ``doc_scope`` group.

For every query, each enabled channel contributes its top ``candidates`` nodes; the union is then
scored exactly by every channel (so a node found only by BM25 still has its cosine), and each
channel's list rank is kept for rank-based fusion. Output: one row per (query, node) candidate.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.channels import bm25_device, dense, lexical, lexical_reme, segvocab, token_cache
from pipeline.contract.errors import ConfigError
from pipeline.core.progress import inner
from pipeline.ops.scope import scope_groups
from pipeline.ops.topk import int_order, topk_long

CHANNELS = ("dense", "lexical", "collab")  # collab: after the others (pipeline.channels.collab)


def node_fields(nodes: pl.DataFrame) -> dict[str, list[str]]:
    """The text of each BM25 field per node ("" where a node lacks the field)."""

    def col(name: str) -> list[str]:
        if name not in nodes.columns:
            return [""] * nodes.height
        c = nodes[name]
        if c.dtype == pl.List(pl.String):
            c = c.list.join(" ")
        return c.fill_null("").to_list()

    return {"title": col("title"), "tags": col("tags"), "body": col("text"), "code": col("code")}


def store_order(nodes: pl.DataFrame) -> np.ndarray | None:
    """Each node's place in its store (``store_order``, ``data=reme``; a node without one after
    those with one), or None without the column: ReMe's order of equal scores."""
    if "store_order" not in nodes.columns:
        return None
    col = nodes["store_order"]
    return col.fill_null(int(col.max() or 0) + 1).to_numpy().astype(np.int64)


def plain(part_q: np.ndarray, part_w: np.ndarray, n_parts: int) -> bool:
    """One part of weight 1 per query, in query order: a pair's dense score is its cosine."""
    return (
        len(part_q) == n_parts
        and np.array_equal(part_q, np.arange(n_parts))
        and bool(np.all(part_w == 1.0))
    )


def dense_pairs(
    xp: np.ndarray,
    part_q: np.ndarray,
    part_w: np.ndarray,
    xb: np.ndarray,
    qi: np.ndarray,
    ni: np.ndarray,
) -> np.ndarray:
    """Dense score of (query, node) pairs: max over the query's parts of weight × cosine."""
    if plain(part_q, part_w, len(xp)):
        return dense.pair_scores(xp, xb, qi, ni)  # one part per query: plain cosine
    pairs = pl.DataFrame({"query_idx": qi, "node_idx": ni}).with_row_index("pair")
    parts = pl.DataFrame({"query_idx": part_q, "part": np.arange(len(part_q)), "w": part_w})
    x = pairs.join(parts, on="query_idx")
    s = (
        dense.pair_scores(xp, xb, x["part"].to_numpy(), x["node_idx"].to_numpy())
        * x["w"].to_numpy()
    )
    best = x.select("pair").with_columns(s=s).group_by("pair").agg(pl.col("s").max()).sort("pair")
    return best["s"].to_numpy().astype(np.float32)


@dataclass
class DenseChannel:
    """The dense channel over node vectors ``xb`` and query-part vectors ``xq`` (part ``j`` belongs
    to query ``part_q[j]`` with weight ``part_w[j]``); ``p`` is the stage's ``DenseParams``."""

    xb: np.ndarray
    xq: np.ndarray
    part_q: np.ndarray
    part_w: np.ndarray
    p: object
    seed: int
    device: str
    xr: object = None  # xb resident on the device (dense.resident), or None: xb is what is read
    f16: object = None  # dense_f16.Float16Scores: ReMe's float16 cosines (dense.cosine=float16)

    def hits(self, nodes_s: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """(part, node, weight × cosine) of the search hits of a scope's query parts (``rows``,
        ascending: :meth:`part_rows`) among its nodes: each part's ``per_part`` best by its exact
        cosine, ties by node (:func:`dense.exact_top`), whatever the other parts of the scan."""
        p = self.p
        if self.f16 is not None:
            qi, ni, s = self.f16.top(rows, nodes_s, p.per_part or p.candidates)
            return self._kept(rows, nodes_s, qi, ni, s)
        xs = _scope_rows(self.vectors(), nodes_s)
        index = dense.build_index(
            xs,
            p.index,
            nlist=p.nlist,
            nprobe=p.nprobe,
            hnsw_m=p.hnsw_m,
            ef_search=p.ef_search,
            seed=self.seed,
            device=self.device,
            block=p.block,
        )
        qi, ni, s = _searched(index, self.xq[rows], xs, p.per_part or p.candidates, p.index)
        return self._kept(rows, nodes_s, qi, ni, s)

    def _kept(self, rows, nodes_s, qi, ni, s) -> tuple[np.ndarray, ...]:
        """The hits past ``min_score`` and of parts with a vector, as (part, node, weight × cos)."""
        p = self.p
        if p.min_score is not None:
            keep = s > p.min_score
            qi, ni, s = qi[keep], ni[keep], s[keep]
        if p.no_query_vector == "keyword":  # a part left without a vector (zero row) finds nothing
            live = np.any(np.asarray(self.xq[rows]) != 0, axis=1)
            qi, ni, s = qi[live[qi]], ni[live[qi]], s[live[qi]]
        return rows[qi], nodes_s[ni], (s * self.part_w[rows][qi]).astype(np.float32)

    def ranks(self, parts: list) -> pl.DataFrame:
        """(query_idx, node_idx, dense_rank): each query's top ``candidates`` among its scope's
        nodes (``parts``: [(node indices, query indices)] per scope), its parts' hits merged by
        the maximum of weight × cosine. With ``prf_docs`` > 0 (Rocchio feedback), a second pass
        adds one part per query (:meth:`feedback`) and ranks again."""
        out = self._ranks(parts)
        if self.p.prf_docs > 0 and out.height:
            self.feedback(out)
            out = self._ranks(parts)
        return out

    def feedback(self, first: pl.DataFrame) -> None:
        """Rocchio for dense vectors: each query gains a part (weight 1) ``normalise(q̂ + β·ĉ)``,
        q̂ its parts' weighted sum and ĉ the mean of its first pass's ``prf_docs`` best nodes (all
        from the query's own scope), both normalised; ``β`` is ``prf_weight``."""
        p = self.p
        top = first.filter(pl.col("dense_rank") <= p.prf_docs)
        q, n = top["query_idx"].to_numpy(), top["node_idx"].to_numpy()
        qs, at = np.unique(q, return_inverse=True)
        c = np.zeros((len(qs), self.xb.shape[1]), np.float64)
        np.add.at(c, at, np.asarray(self.xb[n], np.float64))
        base = np.zeros_like(c)
        mine = np.isin(self.part_q, qs)
        np.add.at(
            base,
            np.searchsorted(qs, self.part_q[mine]),
            self.xq[mine].astype(np.float64) * self.part_w[mine][:, None],
        )
        unit = lambda x: x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)  # noqa: E731
        v = unit(unit(base) + p.prf_weight * unit(c)).astype(self.xq.dtype)
        self.xq = np.concatenate([self.xq, v])
        self.part_q = np.concatenate([self.part_q, qs])
        self.part_w = np.concatenate([self.part_w, np.ones(len(qs), self.part_w.dtype)])

    def _ranks(self, parts: list) -> pl.DataFrame:
        rows = self.part_rows([qs for _r, qs in parts])
        part, n, s = (
            np.concatenate(a) for a in zip(*(self.hits(r, p) for (r, _qs), p in zip(parts, rows)))
        )
        part, n, s, _ = topk_long(part, n, s, self.p.per_part or self.p.candidates)
        q = self.part_q[part]
        order = int_order(q, n)
        q, n, s = q[order], n[order], s[order]
        head = np.flatnonzero(np.r_[True, (q[1:] != q[:-1]) | (n[1:] != n[:-1])]) if len(q) else q
        best = np.maximum.reduceat(s, head) if len(q) else s
        q_, n_, s_, rank = topk_long(q[head], n[head], best, self.p.candidates)
        if self.f16 is not None and self.f16.tie is not None:  # one part per query: no cut above
            q_, n_, s_, rank = self.f16.reorder(q_, n_, s_)
        out = pl.DataFrame({"query_idx": q_, "node_idx": n_, "dense_rank": rank})
        # BME (per_part): a hit's vector score is the best weight × cosine among the parts whose
        # top-n list holds it, not among all parts; one plain part per query: the hit's score is
        # its exact cosine (dense.pair_scores), what :meth:`scores` would compute again
        keep = self.p.per_part or plain(self.part_q, self.part_w, len(self.xq))
        return out.with_columns(dense_hit=pl.Series(s_, dtype=pl.Float32)) if keep else out

    def part_rows(self, groups: list[np.ndarray]) -> list[np.ndarray]:
        """For each group of query indices, the positions of its queries' parts, ascending: what
        ``flatnonzero(isin(part_q, qs))`` gives, from one sort instead of a scan per group."""
        order = int_order(self.part_q)
        sq = self.part_q[order]
        out = []
        for qs in groups:
            lo, hi = np.searchsorted(sq, qs, "left"), np.searchsorted(sq, qs, "right")
            n = hi - lo  # the parts of each query: sq[lo:hi]
            at = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(n.sum())
            out.append(np.sort(order[at]))
        return out

    def scores(self, qi: np.ndarray, ni: np.ndarray) -> np.ndarray:
        """Exact dense score of each (query qi[j], node ni[j]) pair (:func:`dense_pairs`), where
        the vectors are resident (:meth:`vectors`)."""
        if self.f16 is not None:  # one plain part per query (generate checks): part = query
            return self.f16.pairs(qi, ni)
        return dense_pairs(self.xq, self.part_q, self.part_w, self.vectors(), qi, ni)

    def vectors(self):
        """The node vectors the channel scans, rescores and scores pairs with: ``xr`` (the run's
        resident copy, ``dense.resident``), else, when the index runs in torch
        (``dense.runs_in_torch``), ``xb`` moved to the device once, else ``xb``."""
        if self.xr is None and dense.runs_in_torch(self.p.index, self.device):
            from pipeline.channels.dense_torch import to_device

            self.xr = to_device(self.xb, self.device)
        return self.xb if self.xr is None else self.xr


def _scope_rows(xb, nodes_s: np.ndarray):
    """A scope's node vectors: all of ``xb`` for a whole-corpus scope (a memmap stays one), else
    its rows, gathered where ``xb`` lives (``dense_torch.take_rows``)."""
    from pipeline.channels.dense_torch import take_rows

    return xb if len(nodes_s) == len(xb) else take_rows(xb, nodes_s)


@dataclass
class LexicalChannel:
    """The lexical channel: the nodes' field tokens and the queries' terms, tokenised once per run;
    ``p`` is the stage's ``LexicalParams``."""

    tokens: lexical.Tokens
    q_terms: sp.csr_matrix
    p: object
    device: str = "cpu"
    q_order: list | None = None  # order=reme: each query's distinct term ids in query order
    tie: np.ndarray | None = None  # order=reme: each node's store order (None: node order)
    slot: np.ndarray | None = None  # order=reme: each node's persisted BM25 slot (-1: none)
    n_slots: int = 0  # order=reme: that index's slots, deleted ones included
    memo: dict | None = None  # the node table's lexical index, kept for later groups (:func:`kept`)

    @classmethod
    def tokenise(
        cls,
        nodes: pl.DataFrame,
        queries: pl.DataFrame,
        p,
        device: str = "cpu",
        cache: Path | None = None,
        memo: dict | None = None,
    ) -> LexicalChannel:
        """Tokenise the nodes' fields (``node_fields``) and the query texts with ``p``'s tokenizer;
        the nodes' tokens read from or written to ``cache`` (``channels.token_cache``) when given,
        and kept in ``memo`` (one per node table: the query groups that see these nodes at other
        reference times reuse them and the BM25 matrix, :meth:`ranks_and_scores`)."""
        settings = (p.stopwords, p.stemmer, p.tokenizer, p.cjk_bigrams, p.cjk_min_len, p.cjk_set)

        def fresh():
            tok = lexical.make_tokenizer(*settings[:-1])
            return tok, token_cache.tokenised(tok, node_fields(nodes), settings, cache)

        tok, tokens = kept(memo, ("tokens", settings), fresh)
        texts = queries["text"].to_list()
        q_terms = lexical.tokenize_queries(
            tok, texts, tokens.vocab, p.dedupe_query_terms, p.cjk_set
        )
        if p.order != "reme":
            return cls(tokens, q_terms, p, device, memo=memo)
        tie = store_order(nodes)
        order = lexical_reme.query_terms(tok, texts, tokens.vocab)
        return cls(tokens, q_terms, p, device, order, tie, *lexical_reme.slots(nodes), memo=memo)

    def ranks_and_scores(self, segs: Segments) -> tuple[pl.DataFrame, Callable]:
        """(query_idx, node_idx, lexical_rank) of every segment's queries over its own nodes, and
        the exact score of (query, node) pairs of a segment: one block-diagonal BM25 matrix
        (``segvocab``), each segment with its own vocabulary and statistics."""
        if self.q_order is not None:
            return lexical_reme.ranks_and_scores(self, segs)
        p = self.p
        key = ("bm25", tuple(sorted(dict(p.field_weights).items())), p.k1, p.b, p.idf)
        key += (hashlib.sha256(segs.rows.tobytes() + segs.seg.tobytes()).digest(),)
        if self.memo is not None and key not in self.memo:  # a bounded memo: the oldest matrix
            mats = [k for k in self.memo if k[0] == "bm25" and len(k) == len(key)]  # (and its
            for old in mats[: max(0, len(mats) - KEPT_MATRICES + 1)]:  # device copy) goes first
                for k in [k for k in self.memo if k[: len(old)] == old]:
                    del self.memo[k]
        lay, s_mat, st = kept(self.memo, key, lambda: self._matrix(segs))
        q = segvocab.remap(self.q_terms[segs.qs], segs.qseg, lay)
        q = lexical.prf_expand(q, s_mat, p.prf_docs, p.prf_terms, p.prf_weight, st)
        if bm25_device.scorer(p.scorer, self.device) == "torch":  # the same bits on the device
            cut = np.searchsorted(segs.seg, np.arange(len(segs.parts) + 1))
            lo, hi = cut[segs.qseg], cut[segs.qseg + 1]
            on = kept(self.memo, (*key, self.device), lambda: bm25_device.upload(st, self.device))
            qi, di, _sc, rank = bm25_device.topk(q, s_mat, p.candidates, self.device, lo, hi, on)
        else:
            qi, di, _sc, rank = lexical.top_scores(q, s_mat, p.candidates, st)
        ranks = pl.DataFrame(
            {"query_idx": segs.qs[qi], "node_idx": segs.rows[di], "lexical_rank": rank}
        )

        def scores(qi: np.ndarray, ni: np.ndarray) -> np.ndarray:
            vq = segs.query_pos(qi)
            return lexical.pair_scores(q, s_mat, vq, segs.row_pos(segs.qseg[vq], ni))

        return ranks, scores

    def _matrix(self, segs: Segments) -> tuple:
        """(layout, BM25 matrix, its terms × documents CSR) of the segments' nodes: one
        block-diagonal matrix (``segvocab``), each segment with its own vocabulary and statistics."""
        p = self.p
        lay = segvocab.layout(self.tokens.places, segs.rows, segs.seg, len(self.tokens.vocab))
        s_mat = lexical.bm25_matrix(
            self.tokens, p.field_weights, segs.rows, p.k1, p.b, p.idf, segs.seg, lay
        )
        return lay, s_mat, s_mat.T.tocsr()


KEPT_MATRICES = 4  # BM25 matrices a node table's memo keeps (segmentations × settings)


def kept(memo: dict | None, key, compute):
    """``compute()``, kept in ``memo`` under ``key`` for a later call (``memo`` None: computed
    each time). The channels stage passes one memo per node table (``memo.corpus_step``): the
    query groups that see the same nodes at other reference times share its tokens, BM25 matrix
    and the matrix's copy on the device."""
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


@dataclass
class Segments:
    """Scope groups laid end to end: virtual row j is node ``rows[j]`` of segment ``seg[j]``,
    virtual query j is query ``qs[j]`` of segment ``qseg[j]`` (a node may sit in several segments;
    a query in one)."""

    rows: np.ndarray
    seg: np.ndarray
    qs: np.ndarray
    qseg: np.ndarray
    parts: list

    @classmethod
    def of(cls, parts: list) -> Segments:
        """From [(key, node indices (ascending), query indices)] with at least one node each."""
        parts = [(r, q) for _k, r, q in parts]
        cat = lambda arrs: np.concatenate(arrs) if arrs else np.zeros(0, np.int64)  # noqa: E731
        seg_of = lambda k: np.repeat(  # noqa: E731
            np.arange(len(parts), dtype=np.int64), [len(x[k]) for x in parts]
        )
        return cls(
            cat([r for r, _ in parts]), seg_of(0), cat([q for _, q in parts]), seg_of(1), parts
        )

    def query_pos(self, qi: np.ndarray) -> np.ndarray:
        """Virtual index of each query index (each query sits in one segment): the offset from the
        first query when the queries are consecutive ascending indices and every ``qi`` lies among
        them, else a binary search (the same index wherever both apply)."""
        qs = self.qs
        if len(qs) and bool((np.diff(qs) == 1).all()) and _within(qi, qs[:1], qs[-1:], 0):
            return qi - qs[0]
        order = int_order(qs)
        return order[np.searchsorted(qs[order], qi)]

    def row_pos(self, seg: np.ndarray, ni: np.ndarray) -> np.ndarray:
        """Virtual row of node ``ni[j]`` in segment ``seg[j]``: its segment's start plus its offset
        when every segment's rows are consecutive ascending indices and every ``ni[j]`` lies among
        its segment's, else a binary search (the same row wherever both apply)."""
        start = np.searchsorted(self.seg, np.arange(len(self.parts) + 1))
        if len(self.rows) and bool((np.diff(start) > 0).all()):  # no segment empty
            step = np.diff(self.rows)
            step[start[1:-1] - 1] = 1  # between two segments the rows may step anyhow
            first, last = self.rows[start[:-1]], self.rows[start[1:] - 1]
            if bool((step == 1).all()) and _within(ni, first, last, seg):
                return start[seg] + (ni - first[seg])
        n = int(max(self.rows.max(initial=0), ni.max(initial=0))) + 1
        return np.searchsorted(self.seg * n + self.rows, seg * n + ni)


def _within(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray, group) -> bool:
    """Whether every ``keys[j]`` lies in ``lo[group[j]] .. hi[group[j]]``."""
    return bool(((keys >= lo[group]) & (keys <= hi[group])).all())


SEARCH_BLOCK = 1024  # query rows per dense search of one scope (its progress moves per block)


def _searched(index, xq: np.ndarray, xs: np.ndarray, k: int, kind: str):
    """(query row, item, cosine) of each query's ``k`` best: :func:`dense.exact_top` of the
    search, in blocks of ``SEARCH_BLOCK`` queries. A query's hits never depend on the other
    queries of its block (``exact_top``), so the blocks give the bits of one search."""
    out = []  # xs: the index's own vectors for a torch index (DenseChannel.vectors)
    width = lambda a: min(SEARCH_BLOCK, len(xq) - a)  # noqa: E731
    for a in inner(range(0, len(xq), SEARCH_BLOCK), "dense search", len(xq), "query", width):
        block = xq[a : a + SEARCH_BLOCK]
        D, I = dense.search(index, block, k + dense.RESCORE_EXTRA)
        qi, ni, s = dense.exact_top(block, xs, D, I, k, exact=kind in dense.EXACT)
        out.append((qi + a, ni, s))
    if not out:  # no query: the empty result of one search
        D, I = dense.search(index, xq, k + dense.RESCORE_EXTRA)
        return dense.exact_top(xq, xs, D, I, k, exact=kind in dense.EXACT)
    return tuple(np.concatenate(x) for x in zip(*out))


def _candidates(segs: Segments, dch: DenseChannel | None, lch: LexicalChannel | None, seconds=()):
    """Every segment's candidates: the union of the channels' lists, each pair scored by every
    channel; ``seconds`` [(name, fn)] (collab, installed channels) add lists read from the first
    layer's (a pair they did not list scores 0 there)."""
    lists = []
    if dch is not None:
        lists.append(dch.ranks(segs.parts))
    if lch is not None:
        lex_ranks, lex_scores = lch.ranks_and_scores(segs)
        lists.append(lex_ranks)
    cand = lists[0]
    for other in lists[1:]:
        cand = cand.join(other, on=["query_idx", "node_idx"], how="full", coalesce=True)
    first = cand
    for name, fn in seconds:
        cand = cand.join(fn(first), on=["query_idx", "node_idx"], how="full", coalesce=True)
        cand = cand.with_columns(pl.col(name).fill_null(0.0))
    qi, ni = cand["query_idx"].to_numpy(), cand["node_idx"].to_numpy()
    if dch is not None:  # a dense hit keeps its score; only the other channels' pairs are scored
        d = np.empty(cand.height, np.float32)
        known = np.zeros(cand.height, bool)
        if "dense_hit" in cand.columns:
            known = cand["dense_hit"].is_not_null().to_numpy()
            d[known] = cand["dense_hit"].to_numpy()[known]
            cand = cand.drop("dense_hit")
        d[~known] = dch.scores(qi[~known], ni[~known])
        cand = cand.with_columns(dense=pl.Series(d, dtype=pl.Float32))
    if lch is not None:
        cand = cand.with_columns(lexical=pl.Series(lex_scores(qi, ni)))
    return cand


def _plugins(enabled: list[str]) -> dict:
    """The installed channels ``enabled`` names; refuses a name neither built in nor installed, or
    a list without the dense or lexical channel (the others read their hits)."""
    from pipeline.contract.registry import installed_channels

    plugins = {c: f for c, f in installed_channels().items() if c in enabled and c not in CHANNELS}
    bad = set(enabled) - set(CHANNELS) - set(plugins)
    if bad or not enabled or not set(enabled) & {"dense", "lexical"}:
        raise ConfigError(
            f"channels={list(enabled)}; choose one or more of {list(CHANNELS)} or an installed "
            f"channel {sorted(installed_channels())} (collab and installed channels read the "
            "dense or lexical channel's hits)"
        )
    return plugins


@dataclass(frozen=True)
class ChannelSettings:
    """What the recipe decides about candidate generation: the enabled channels (the ``channels``
    list, in its order) and their settings: ``dense``, ``lexical``, ``collab`` (the ``channels``
    stage's ``DenseParams``, ``LexicalParams`` and ``CollabParams``; None for a channel that is not
    enabled), the FAISS ``seed`` and whether archived nodes are searched (``include_archived``)."""

    enabled: tuple[str, ...]
    dense: object = None
    lexical: object = None
    collab: object = None
    seed: int = 13
    include_archived: bool = False


@dataclass
class CandidateInputs:
    """What a group brings to candidate generation besides its node and query tables.

    ``xb``: the node vectors; ``xq``: one vector per query, or, with ``part_q`` (query of each row)
    and ``part_w`` (its weight), several per query (``pipeline.stages.query.plan``), whose hits
    merge by max of w·cos. ``parts``: the scope groups [(key, node indices, query indices)]
    (None: ``scope_groups`` of the tables); each query's candidates come from its group's nodes
    only. ``log``: the injection log the ``collab`` channel reads. ``resident``: ``xb`` on the
    device (``dense.resident``), where the dense channel then scans, rescores and scores pairs.
    ``tokens_cache``: the folder of the nodes' cached field tokens (``channels.token_cache``; None:
    tokenised afresh). ``memo``: where the lexical channel keeps its index of these nodes for the
    next group over them (:func:`kept`; None: nothing kept). ``device``: where the work runs."""

    xb: np.ndarray | None = None
    xq: np.ndarray | None = None
    part_q: np.ndarray | None = None
    part_w: np.ndarray | None = None
    parts: list | None = None
    log: pl.DataFrame | None = None
    resident: object = None
    tokens_cache: Path | None = None
    memo: dict | None = None
    device: str = "cpu"


def generate(
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    settings: ChannelSettings,
    inputs: CandidateInputs | None = None,
) -> pl.DataFrame:
    """Candidates with columns query_idx, node_idx, <channel> score and <channel>_rank per channel
    of ``settings.enabled`` (:class:`ChannelSettings`), from the group's ``inputs``
    (:class:`CandidateInputs`: vectors, scope groups, caches; default: none, for a lexical-only
    call). The ``collab`` channel reads the injection log (``inputs.log``) and needs another
    channel."""
    s, a = settings, inputs if inputs is not None else CandidateInputs()
    enabled = list(s.enabled)
    xb, xq, part_q, part_w = a.xb, a.xq, a.part_q, a.part_w
    if xq is not None and part_q is None:
        part_q, part_w = np.arange(len(xq)), np.ones(len(xq))
    plugins = _plugins(enabled)
    dch = (
        DenseChannel(xb, xq, part_q, part_w, s.dense, s.seed, a.device, a.resident)
        if "dense" in enabled
        else None
    )
    if dch is not None and s.dense.cosine == "float16":
        dch.f16 = _float16(nodes, queries, xb, xq, part_q, part_w)
        dch.f16.tie = store_order(nodes) if s.dense.ties == "store" else None
    lch = (
        LexicalChannel.tokenise(nodes, queries, s.lexical, a.device, a.tokens_cache, a.memo)
        if "lexical" in enabled
        else None
    )
    parts = a.parts
    if parts is None:
        parts = scope_groups(nodes, queries, s.include_archived)
    parts = [(k, r, q) for k, r, q in parts if len(r) and len(q)]
    cols = {"query_idx": pl.Int64, "node_idx": pl.Int64}
    for ch in enabled:
        cols |= {f"{ch}_rank": pl.Int32, ch: pl.Float32}
    if not parts:
        return pl.DataFrame(schema=cols)
    seconds = _seconds(enabled, plugins, nodes, queries, parts, a.log, s.collab)
    cand = _candidates(Segments.of(parts), dch, lch, seconds)
    return cand.select(list(cols)).cast(cols).sort(["query_idx", "node_idx"])


def _float16(nodes, queries, xb, xq, part_q, part_w):
    """ReMe's float16 scores over the stored vectors (a node or query without one: its encoded
    vector, in float16 as ReMe's embedding store keeps it); one plain part per query only."""
    from pipeline.channels.dense_f16 import Float16Scores, raw16

    if not plain(part_q, part_w, len(xq)) or len(xq) != queries.height:
        raise ConfigError(
            "dense.cosine=float16 (ReMe's cosines) scores each query's own vector: turn "
            "query.blend and query.intent_split off, or use dense.cosine=float32"
        )
    q16 = np.asarray(xq, np.float32).astype(np.float16)
    if "embedding" in queries.columns:
        own = raw16(queries, queries.height, "queries")
        have = queries["embedding"].is_not_null().to_numpy()
        if own.shape[1] == q16.shape[1]:
            q16[have] = own[have]
    if "embedding" in nodes.columns:
        return Float16Scores(q16, raw16(nodes, nodes.height, "nodes"))
    return Float16Scores(q16, np.asarray(xb, np.float32).astype(np.float16))  # encoded here


def _seconds(enabled, plugins: dict, nodes, queries, parts: list, log, collab_p) -> list:
    """The channels that read the first ones' candidates: ``collab``, then installed channels,
    as (name, candidates of the first channels → theirs)."""
    seconds = []
    if "collab" in enabled:
        from pipeline.channels import collab

        seconds.append(
            ("collab", lambda first: collab.candidates(first, nodes, queries, parts, log, collab_p))
        )
    for name, load in plugins.items():  # installed channels
        fn = load()
        seconds.append((name, lambda first, fn=fn: fn(first, nodes, queries, parts)))
    return seconds
