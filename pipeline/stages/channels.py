"""The ``channels`` stage: the dense (FAISS) and lexical (BM25) channels' parameters, the stage's
own (:class:`ChannelsParams`) and its run, which caches each group's candidates under its stage key.

The array code that turns them into candidates is ``pipeline.channels`` (``candidates.generate``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import polars as pl

from pipeline.channels import dense
from pipeline.channels.candidates import CandidateInputs, ChannelSettings, generate
from pipeline.channels.collab import CollabParams
from pipeline.contract import io
from pipeline.contract.errors import require_one_of
from pipeline.core.memo import corpus_step, key_prefix, stage_key
from pipeline.core.stage import Params, Stage


@dataclass(frozen=True)
class DenseParams(Params):
    """Dense (FAISS) channel settings: index type and its knobs, candidates per query, BME's per-part cut."""

    GROUP: ClassVar[str] = "dense"
    OPTION: ClassVar[str] = "flat"  # what Params.defaults() loads
    index: str
    candidates: int
    nlist: int
    nprobe: int
    hnsw_m: int
    ef_search: int
    block: int  # blocked: node rows per block of the streamed scan
    per_part: int | None  # BME: top-n per query text before the merge (null = candidates)
    min_score: float | None  # BME: keep only hits with cosine > min_score (null = keep all)
    prf_docs: int  # Rocchio feedback: best first-pass nodes per query (0 = off)
    prf_weight: float  # Rocchio feedback: weight of their normalised mean against the query's
    no_query_vector: str  # error | keyword: a part nothing can embed searches nothing (ReMe)
    cosine: str  # float32 | float16: ReMe's float16 cosines of the stored vectors (dense_f16)
    ties: str  # node | store: equal float16 cosines in store order (ReMe), else by node

    def __post_init__(self) -> None:
        require_one_of("dense.no_query_vector", self.no_query_vector, ("error", "keyword"))
        require_one_of("dense.cosine", self.cosine, ("float32", "float16"))
        require_one_of("dense.ties", self.ties, ("node", "store"))


@dataclass(frozen=True)
class LexicalParams(Params):
    """Lexical (BM25) channel settings: candidates, k1/b, idf variant, tokenizer, stopwords and field weights."""

    GROUP: ClassVar[str] = "lexical"
    OPTION: ClassVar[str] = "bm25"  # what Params.defaults() loads
    candidates: int
    k1: float
    b: float
    stopwords: str | None
    stemmer: str | None
    tokenizer: str  # auto | english | cjk_char | jieba | fts5 | reme (pipeline.ops.tokenize)
    cjk_bigrams: bool  # cjk_char: add each pair of adjacent Han characters
    cjk_min_len: int  # jieba: drop Han words shorter than this (OKS: 2)
    cjk_set: bool  # OKS: a text with Han characters counts each term once (tf 1, |d| distinct)
    dedupe_query_terms: bool
    idf: str  # lucene (bm25s) | fts5 (SQLite FTS5, OKS)
    field_weights: dict
    prf_docs: int  # pseudo-relevance feedback: top documents read (0 = off; channels.lexical)
    prf_terms: int  # expansion terms added per query
    prf_weight: float  # their total weight, × the query's own term count
    scorer: str  # auto | scipy | torch (channels.bm25_device): where the BM25 top-k is computed
    order: str  # score | reme: ReMe's BM25 arithmetic, top-k and tie order (channels.lexical_reme)

    def __post_init__(self) -> None:
        require_one_of("lexical.order", self.order, ("score", "reme"))


KEYS = [
    "channels",
    "dense",
    "lexical",
    "collab",
    "embed",
    "query",
    "include_archived",
    "seed",
]  # what the stage key covers


@dataclass(frozen=True)
class ChannelsParams(Params):
    """The ``channels`` stage's parameters: the enabled channels and their groups (``dense``,
    ``lexical``, ``collab``) with the run's ``seed`` and ``include_archived``
    (``candidates.ChannelSettings``), the ``cache_dir`` the candidates and tokens are kept in, and
    the config part of the stage key (``memo.key_prefix`` of :data:`KEYS`)."""

    settings: ChannelSettings
    cache_dir: str
    key_prefix: bytes

    @classmethod
    def of(cls, run) -> ChannelsParams:
        """The parameters of a run (a ``RunState``: its config and dataset)."""
        cfg = run.cfg
        return cls(
            ChannelSettings(
                tuple(cfg.channels),
                DenseParams.from_cfg(cfg.dense, "dense"),
                LexicalParams.from_cfg(cfg.lexical, "lexical"),
                CollabParams.from_cfg(cfg.collab, "collab"),
                cfg.seed,
                cfg.include_archived,
            ),
            str(cfg.cache_dir),
            key_prefix(cfg, run.ds, KEYS),
        )


def run_stage(ctx, p: ChannelsParams) -> object:
    """Candidates of the group's queries from every enabled channel; cached on disk under the stage
    key and reused by a rerun (``ctx.reused``)."""
    state, enabled = ctx.run, p.settings.enabled
    key = stage_key(
        p.key_prefix,
        ctx.nodes,
        ctx.queries,
        () if ctx.segments is None else tuple((len(r), len(q)) for _k, r, q in ctx.segments),
    )
    log = state.ds.use_log() if "collab" in enabled else None
    if log is not None:  # the collab channel's statistics: the log's exact rows
        key = hashlib.sha256((key + log.write_json()).encode()).hexdigest()[:20]
    path = Path(p.cache_dir) / "candidates" / f"{key}.parquet"
    if path.exists():
        ctx.cand = pl.read_parquet(path)
        ctx.reused.append("channels")
    else:
        inputs = CandidateInputs(
            ctx.xb,
            ctx.xparts,
            ctx.part_q,
            ctx.part_w,
            ctx.segments,
            log,
            dense.resident(ctx, p.settings.dense.index),
            Path(p.cache_dir) / "tokens",
            corpus_step(state.memo, "lexical", ctx.nodes, dict),  # kept for the next groups
            state.device,
        )
        ctx.cand = generate(ctx.nodes, ctx.queries, p.settings, inputs)
        io.write_parquet(path, ctx.cand)
    state.log.add("candidates", ctx.cand.height)
    return ctx


STAGE = Stage("channels", run_stage, params=ChannelsParams.of)
