"""The ``channels`` stage's parameters: the dense (FAISS) and lexical (BM25) channels.

The array code that turns them into candidates is ``pipeline.channels`` (``candidates.generate``).
"""
from __future__ import annotations

from dataclasses import dataclass, field


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
