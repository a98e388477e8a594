"""Candidate generation: dense (FAISS) and lexical (BM25) channels, per ``doc_scope`` group.

For every query, each enabled channel contributes its top ``candidates`` nodes; the union is then
scored exactly by every channel (so a node found only by BM25 still has its cosine), and each
channel's list rank is kept for rank-based fusion. Output: one row per (query, node) candidate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.errors import ConfigError
from pipeline.ops.scope import scope_groups
from pipeline.progress import progress
from pipeline.ops.topk import topk_dense, topk_long, topk_sparse
from pipeline.stages import dense, lexical
from pathlib import Path

from omegaconf import OmegaConf

from pipeline import io
from pipeline.common import key_prefix, stage_key
from pipeline.stage import Stage

CHANNELS = ("dense", "lexical")


@dataclass
class DenseParams:
    index: str = "flat"
    candidates: int = 100
    nlist: int = 1024
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 128
    block: int = 65536  # blocked: node rows per block of the streamed scan
    per_part: int | None = None  # BME: top-n per query text before the merge (null = candidates)
    min_score: float | None = None  # BME: keep only hits with cosine > min_score (null = keep all)


@dataclass
class LexicalParams:
    candidates: int = 100
    k1: float = 1.5
    b: float = 0.75
    stopwords: str | None = "en"
    stemmer: str | None = None
    tokenizer: str = "auto"  # auto | english | cjk_char | jieba (pipeline.ops.tokenize)
    cjk_bigrams: bool = False  # cjk_char: add each pair of adjacent Han characters
    cjk_min_len: int = 1  # jieba: drop Han words shorter than this (OKS: 2)
    cjk_set: bool = False  # OKS: a text with Han characters counts each term once (tf 1, |d| distinct)
    dedupe_query_terms: bool = False
    idf: str = "lucene"  # lucene (bm25s) | fts5 (SQLite FTS5, OKS)
    field_weights: dict = field(default_factory=lambda: {"title": 5.0, "tags": 3.0, "body": 1.0, "code": 0.5})


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


def _long(qs: np.ndarray, nodes: np.ndarray, res: tuple, name: str) -> pl.DataFrame:
    qi, di, sc, rank = res
    return pl.DataFrame({"query_idx": qs[qi], "node_idx": nodes[di], f"{name}_rank": rank})


def dense_pairs(xp: np.ndarray, part_q: np.ndarray, part_w: np.ndarray, xb: np.ndarray, qi: np.ndarray,
                ni: np.ndarray) -> np.ndarray:
    """Dense score of (query, node) pairs: max over the query's parts of weight × cosine."""
    if len(part_q) == len(xp) and np.array_equal(part_q, np.arange(len(xp))) and np.all(part_w == 1.0):
        return dense.pair_scores(xp, xb, qi, ni)  # one part per query: plain cosine
    pairs = pl.DataFrame({"query_idx": qi, "node_idx": ni}).with_row_index("pair")
    parts = pl.DataFrame({"query_idx": part_q, "part": np.arange(len(part_q)), "w": part_w})
    x = pairs.join(parts, on="query_idx")
    s = dense.pair_scores(xp, xb, x["part"].to_numpy(), x["node_idx"].to_numpy()) * x["w"].to_numpy()
    best = x.select("pair").with_columns(s=s).group_by("pair").agg(pl.col("s").max()).sort("pair")
    return best["s"].to_numpy().astype(np.float32)


def generate(nodes: pl.DataFrame, queries: pl.DataFrame, enabled: list[str], xb: np.ndarray | None,
             xq: np.ndarray | None, dense_p: DenseParams, lex_p: LexicalParams, device: str = "cpu",
             seed: int = 13, include_archived: bool = False, part_q: np.ndarray | None = None,
             part_w: np.ndarray | None = None) -> pl.DataFrame:
    """Candidates with columns query_idx, node_idx, <channel> score and <channel>_rank per channel.

    ``xq`` holds one vector per query, or — with ``part_q`` (query of each row) and ``part_w`` (its
    weight) — several per query (``pipeline.stages.query.plan``): their hits merge by max of w·cos.
    """
    if xq is not None and part_q is None:
        part_q, part_w = np.arange(len(xq)), np.ones(len(xq))
    bad = set(enabled) - set(CHANNELS)
    if bad or not enabled:
        raise ConfigError(f"channels={list(enabled)}; choose one or more of {list(CHANNELS)}")
    use_lex = "lexical" in enabled
    if use_lex:
        tok = lexical.make_tokenizer(lex_p.stopwords, lex_p.stemmer, lex_p.tokenizer, lex_p.cjk_bigrams,
                                     lex_p.cjk_min_len)
        tokens = lexical.tokenize_fields(tok, node_fields(nodes), lex_p.cjk_set)
        q_terms = lexical.tokenize_queries(tok, queries["text"].to_list(), tokens.vocab, lex_p.dedupe_query_terms,
                                           lex_p.cjk_set)
    parts = []
    for _key, nodes_s, qs in progress(scope_groups(nodes, queries, include_archived), "channels", unit="scope"):
        if len(nodes_s) == 0:
            continue
        lists = []
        if "dense" in enabled:
            xs = xb if len(nodes_s) == len(xb) else xb[nodes_s]  # a whole-corpus scope keeps a memmap on disk
            index = dense.build_index(xs, dense_p.index, nlist=dense_p.nlist, nprobe=dense_p.nprobe,
                                      hnsw_m=dense_p.hnsw_m, ef_search=dense_p.ef_search, seed=seed, device=device,
                                      block=dense_p.block)
            rows = np.flatnonzero(np.isin(part_q, qs))
            per_part = dense_p.per_part or dense_p.candidates
            D, I = dense.search(index, xq[rows], per_part)
            if dense_p.min_score is not None:
                I = np.where(D > dense_p.min_score, I, -1)
            D = D * part_w[rows][:, None]
            pi, di, sc, _ = topk_dense(D, I, per_part)
            merged = (pl.DataFrame({"query_idx": part_q[rows][pi], "node_idx": nodes_s[di], "s": sc})
                      .group_by("query_idx", "node_idx").agg(pl.col("s").max()))
            q_, n_, _, rank = topk_long(merged["query_idx"].to_numpy(), merged["node_idx"].to_numpy(),
                                        merged["s"].to_numpy(), dense_p.candidates)
            lists.append(pl.DataFrame({"query_idx": q_, "node_idx": n_, "dense_rank": rank}))
        if use_lex:
            s_mat = lexical.bm25_matrix(tokens, lex_p.field_weights, nodes_s, lex_p.k1, lex_p.b, lex_p.idf)
            r = lexical.score(q_terms[qs], s_mat)
            lists.append(_long(qs, nodes_s, topk_sparse(r, lex_p.candidates), "lexical"))
        cand = lists[0]
        for other in lists[1:]:
            cand = cand.join(other, on=["query_idx", "node_idx"], how="full", coalesce=True)
        qi, ni = cand["query_idx"].to_numpy(), cand["node_idx"].to_numpy()
        if "dense" in enabled:
            cand = cand.with_columns(dense=pl.Series(dense_pairs(xq, part_q, part_w, xb, qi, ni)))
        if use_lex:
            local = np.searchsorted(nodes_s, ni)
            q_local = np.searchsorted(qs, qi)
            cand = cand.with_columns(lexical=pl.Series(lexical.pair_scores(q_terms[qs], s_mat, q_local, local)))
        parts.append(cand)
    cols = {"query_idx": pl.Int64, "node_idx": pl.Int64}
    for ch in enabled:
        cols |= {f"{ch}_rank": pl.Int32, ch: pl.Float32}
    if not parts:
        return pl.DataFrame(schema=cols)
    return pl.concat([p.select(list(cols)).cast(cols) for p in parts]).sort(["query_idx", "node_idx"])


KEYS = ["channels", "dense", "lexical", "embed", "query", "include_archived", "seed"]  # what the stage key covers


def run_stage(ctx, p: tuple) -> object:
    """Candidates of the group's queries from every enabled channel; cached on disk under the stage
    key and reused by a rerun (``ctx.reused``)."""
    st, cfg = ctx.run, ctx.cfg
    key = stage_key(cfg, st.ds, ctx.nodes, ctx.queries, KEYS, st.const("key:channels", lambda: key_prefix(cfg, st.ds, KEYS)))
    path = Path(cfg.cache_dir) / "candidates" / f"{key}.parquet"
    if path.exists():
        ctx.cand = pl.read_parquet(path)
        ctx.reused.append("channels")
    else:
        ctx.cand = generate(ctx.nodes, ctx.queries, list(cfg.channels), ctx.xb, ctx.xparts, *p, st.device,
                            cfg.seed, cfg.include_archived, ctx.part_q, ctx.part_w)
        io.write_parquet(path, ctx.cand)
    st.log.add("candidates", ctx.cand.height)
    return ctx


STAGE = Stage("channels", run_stage, params=lambda run: (
    DenseParams(**run.cfg.dense), LexicalParams(**OmegaConf.to_container(run.cfg.lexical, resolve=True))))
