"""The run-wide embed stage: node vectors once per run (content-hash cached, or a memmapped file
for ``dense.index=blocked``) and the vectors of every query part (``stages.query.plan``). The
encoders and the embedding cache are in ``stages.embed``."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.common import call_target, corpus_step
from pipeline.stages import query
from pipeline.stages.embed import EmbeddingCache, cache_tag, embed_cached


def embed_texts(nodes: pl.DataFrame, include_title: bool) -> list[str]:
    """The text each node is embedded from: its title on a line of its own before the text (when
    ``include_title`` and the text does not start with it already)."""
    texts = nodes["text"].to_list()
    if not include_title or "title" not in nodes.columns:
        return texts
    return [
        t if not ti or t.startswith(ti) else f"{ti}\n{t}"
        for t, ti in zip(texts, nodes["title"].to_list())
    ]


def embed_nodes(cfg, nodes: pl.DataFrame, device: str):
    """(encoder, cache, node embeddings (n, d), number of texts actually encoded)."""
    encoder = call_target(cfg.embed.encoder)
    cache = (
        EmbeddingCache(Path(cfg.cache_dir) / f"emb-{encoder.model_id}.sqlite", encoder.dim)
        if cfg.embed.cache
        else None
    )
    texts = embed_texts(nodes, cfg.embed.include_title)
    if (
        cfg.dense.get("index") == "blocked"
    ):  # kept on disk as a memmapped .npy, keyed by content hash
        from pipeline.channels.blocked import memmap_cached

        xb, n = memmap_cached(
            Path(cfg.cache_dir),
            cache_tag(encoder),
            texts,
            lambda t: embed_cached(encoder, t, cache, device),
        )
        return encoder, cache, xb, n
    xb, n = embed_cached(encoder, texts, cache, device)
    return encoder, cache, xb, n


def embed_run(state, nodes: pl.DataFrame, queries: pl.DataFrame) -> int:
    """The run-wide embed stage: node embeddings (once, content-hash cached) and every query part's
    (``query.plan``) onto ``state`` (a ``context.RunState``); returns the number of texts encoded."""
    cfg = state.cfg
    if "dense" not in cfg.channels:
        return 0
    with state.log.stage("embed"):
        state.encoder, state.cache, state.xb, n1 = corpus_step(
            state.memo, "embed", nodes, lambda: embed_nodes(cfg, nodes, state.device)
        )
        qplan = query.plan(
            queries,
            cfg.query.blend,
            cfg.query.intent_split,
            tuple(cfg.query.weights),
            cfg.query.max_segments,
        )
        state.xparts, n2 = embed_cached(
            state.encoder, qplan["text"].to_list(), state.cache, state.device
        )
        state.part_q, state.part_w = qplan["query_idx"].to_numpy(), qplan["weight"].to_numpy()
    state.log.rows["query_parts"] = qplan.height
    return n1 + n2
