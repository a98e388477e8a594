"""The lexical channel in ReMe's order (``lexical.order=reme``, preset reme): each query's
``candidates`` best chunks by ReMe's own BM25 arithmetic and top-k (``pipeline.ops.reme_bm25``),
over the body field (ReMe indexes the chunk text only), the documents in ReMe's slot order: its
persisted index's slots when ``data=reme`` read them (``keyword_slot`` / ``keyword_slots``,
``adapters/reme_slots.py``: deleted slots included, as ReMe's loaded index keeps them), else the
store order (``store_order``; node order without it), as ReMe's rebuilt index. Its scores are ReMe's float32 bits
and its ties ReMe's order, which ``select.tie_break`` then keeps. A brute-force pass per query,
as ReMe's: for ReMe-sized stores.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from pipeline.channels.lexical import term_ids
from pipeline.ops import reme_bm25


def query_terms(tokenizer, texts: list[str], vocab: dict[str, int]) -> list[list[int]]:
    """Each query's distinct known term ids in the order they first occur
    (``BM25Index._encode_query``)."""
    lens, term = term_ids(
        tokenizer, texts, update=False, split=getattr(tokenizer, "query_splitter", None)
    )
    empty = vocab.get("")
    out, at = [], 0
    for n in lens:
        ids = [int(t) for t in term[at : at + n] if int(t) != empty]
        out.append(list(dict.fromkeys(ids)))
        at += n
    return out


def slots(nodes: pl.DataFrame) -> tuple[np.ndarray | None, int]:
    """(each node's slot in ReMe's persisted BM25 index, -1 for none; the index's slots), or
    (None, 0) when the nodes carry none (``keyword_slot``, ``keyword_slots``: ``data=reme``)."""
    if "keyword_slot" not in nodes.columns or nodes["keyword_slot"].is_null().all():
        return None, 0
    n = int(nodes["keyword_slots"].max())
    return nodes["keyword_slot"].fill_null(-1).to_numpy().astype(np.int64), n


def ranks_and_scores(ch, segs) -> tuple[pl.DataFrame, Callable]:
    """(query_idx, node_idx, lexical_rank) of every segment's queries over its own nodes, and the
    score of (query, node) pairs: ReMe's score, 0 for a node without a term."""
    body = ch.tokens.fields["body"].tocsr()
    tie = ch.tie if ch.tie is not None else np.arange(body.shape[0])
    q_out, n_out, r_out = [], [], []
    table: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # query → (its hit nodes sorted, scores)
    for rows, qs in segs.parts:
        slot = None if ch.slot is None else ch.slot[rows]
        if slot is not None and not (slot >= 0).any():
            slot = None
        tf, lens, at = reme_bm25.slots(body[rows], tie[rows], slot, ch.n_slots)
        nodes = np.where(at >= 0, rows[np.maximum(at, 0)], -1)
        for q in qs:
            s = reme_bm25.scores(tf, lens, ch.q_order[q], ch.p.k1, ch.p.b)
            top = reme_bm25.top_k(s, ch.p.candidates)
            q_out.append(np.full(len(top), q, np.int64))
            n_out.append(nodes[top])
            r_out.append(np.arange(1, len(top) + 1, dtype=np.int32))
            hit = np.flatnonzero(s)  # only the nodes holding a query term: memory ∝ hits
            by_node = np.argsort(nodes[hit], kind="stable")
            table[int(q)] = (nodes[hit][by_node], s[hit][by_node])
    cat = lambda a, t: np.concatenate(a) if a else np.zeros(0, t)  # noqa: E731
    ranks = pl.DataFrame(
        {
            "query_idx": cat(q_out, np.int64),
            "node_idx": cat(n_out, np.int64),
            "lexical_rank": cat(r_out, np.int32),
        }
    )

    def scores(qi: np.ndarray, ni: np.ndarray) -> np.ndarray:
        out = np.zeros(len(qi), np.float32)
        for q in np.unique(qi):
            at = np.flatnonzero(qi == q)
            nodes, s = table.get(int(q), (np.zeros(0, np.int64), np.zeros(0, np.float32)))
            pos = np.minimum(np.searchsorted(nodes, ni[at]), max(len(nodes) - 1, 0))
            hit = nodes[pos] == ni[at] if len(nodes) else np.zeros(len(at), bool)
            out[at[hit]] = s[pos[hit]]
        return out

    return ranks, scores
