"""The run-wide embed stage: node vectors once per run (content-hash cached, or a memmapped file
for ``dense.index=blocked``) and the vectors of every query part (``stages.query.plan``). The
encoders and the embedding cache are in ``encoders.models``.

Bring your own vectors: nodes with an ``embedding`` column (a ReMe store's chunk vectors, a Parquet
table's column) use those, L2-normalised (cosine, as ReMe scores them), and nothing is encoded for
them; ``Dataset.notes["vector_model"]`` names their model. A query's own ``embedding`` is the vector
of its ``current`` part (its text, or ``query_rewrite``); any other part (context blend, intent
segments, a query without a vector) is encoded by ``embed.encoder`` only when its ``model_id`` is
that model (``embed.model_path`` = a local copy of it), else a ConfigError — or, with
``dense.no_query_vector=keyword`` (preset reme), a zero row that the dense channel skips, so that
query is searched by keyword only (ReMe's fallback; a ``fallbacks`` entry in the manifest). Every node needs a vector,
every vector the same width as the nodes': a missing vector or another width is an error, never a
silent mix of two vector spaces; query vectors without node vectors are refused too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from omegaconf import OmegaConf

from pipeline.contract.errors import ConfigError
from pipeline.contract.registry import call_target
from pipeline.core.backend import fallback
from pipeline.core.memo import corpus_step
from pipeline.core.stage import Params
from pipeline.encoders.models import EmbeddingCache, cache_tag, embed_cached
from pipeline.stages import query


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


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero: cosine 0, as ReMe's 1e-10 denominator)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def stored(frame: pl.DataFrame, table: str, ids: str) -> tuple[np.ndarray | None, np.ndarray]:
    """(the ``embedding`` column as unit rows (n, d) with zeros where missing, which rows have one);
    (None, all False) without the column. Two widths are a ConfigError naming the row."""
    if "embedding" not in frame.columns:
        return None, np.zeros(frame.height, bool)
    col = frame["embedding"]
    have = col.is_not_null().to_numpy()
    widths = col.list.len().to_numpy()
    d = int(widths[have][0]) if have.any() else 0
    bad = np.flatnonzero(have & (widths != d))
    if len(bad):
        raise ConfigError(
            f"{table} {frame[ids][int(bad[0])]!r}: embedding of width {int(widths[bad[0]])}, "
            f"the first {table} vector has {d}; give every vector one model's width"
        )
    x = np.zeros((frame.height, d), np.float32)
    if have.any():
        x[have] = np.asarray(col.filter(col.is_not_null()).to_list(), np.float32)
    return _unit(x), have


def node_vectors(nodes: pl.DataFrame) -> np.ndarray | None:
    """The nodes' stored vectors (unit rows), None without an ``embedding`` column; a node
    without one is a ConfigError (the dense channel cannot mix vector spaces)."""
    xb, have = stored(nodes, "node", "node_id")
    if xb is not None and not have.all():
        raise ConfigError(
            f"node {nodes['node_id'][int(np.flatnonzero(~have)[0])]!r} has no embedding while "
            f"{int(have.sum())} of {nodes.height} nodes carry one; give every node a vector, or drop "
            "the column (e.g. data.vectors=false) to embed every node with embed.model_path"
        )
    return xb


@dataclass(frozen=True)
class EmbedParams(Params):
    """The embed stage's parameters, built once per run by :meth:`of_run`: the encoder's registry
    spec (``embed.encoder``, resolved), ``embed.include_title`` and ``embed.cache``, the run's
    ``cache_dir``, whether the dense channel runs and on a blocked index (``dense.index``),
    ``dense.no_query_vector`` and the query plan's settings (``query``: blend, intent split,
    weights, max segments). The ``embed`` options differ in their keys (an encoder's own), so
    these are taken by name, not checked against one YAML."""

    encoder: dict
    include_title: bool
    cache: bool
    cache_dir: str
    dense: bool
    blocked: bool
    no_query_vector: str | None
    blend: bool
    intent_split: bool
    weights: tuple
    max_segments: int

    @classmethod
    def of_run(cls, cfg) -> "EmbedParams":
        """The embed stage's parameters from a run's config."""
        q = cfg.query
        return cls(
            encoder=OmegaConf.to_container(cfg.embed.encoder, resolve=True),
            include_title=bool(cfg.embed.include_title),
            cache=bool(cfg.embed.cache),
            cache_dir=str(cfg.cache_dir),
            dense="dense" in cfg.channels,
            blocked=cfg.dense.get("index") == "blocked",
            no_query_vector=cfg.dense.get("no_query_vector"),
            blend=bool(q.blend),
            intent_split=bool(q.intent_split),
            weights=tuple(q.weights),
            max_segments=int(q.max_segments),
        )

    def plan(self, queries: pl.DataFrame) -> pl.DataFrame:
        """The query parts to embed (:func:`pipeline.stages.query.plan` with these settings)."""
        return query.plan(queries, self.blend, self.intent_split, self.weights, self.max_segments)


def embed_nodes(p: EmbedParams, nodes: pl.DataFrame, device: str):
    """(encoder, cache, node embeddings (n, d), number of texts actually encoded); stored
    vectors (an ``embedding`` column) are used as they are and encode nothing."""
    encoder = call_target(p.encoder, "embed.encoder")
    cache = (
        EmbeddingCache(Path(p.cache_dir) / f"emb-{encoder.model_id}.sqlite", encoder.dim)
        if p.cache
        else None
    )
    xb = node_vectors(nodes)
    if xb is not None:
        return encoder, cache, xb, 0
    texts = embed_texts(nodes, p.include_title)
    if p.blocked:  # kept on disk as a memmapped .npy, keyed by content hash
        from pipeline.channels.blocked import memmap_cached

        xb, n = memmap_cached(
            Path(p.cache_dir),
            cache_tag(encoder, device),
            texts,
            lambda t: embed_cached(encoder, t, cache, device),
        )
        return encoder, cache, xb, n
    xb, n = embed_cached(encoder, texts, cache, device)
    return encoder, cache, xb, n


def keyword_channels(
    channels: list[str], no_query_vector: str | None, store_vectors: str | None
) -> list[str]:
    """``channels`` without ``dense`` when ``dense.no_query_vector=keyword`` (``no_query_vector``,
    preset reme) meets a store its system indexed without an embedding model (``store_vectors``:
    ``Dataset.notes["store_vectors"]``, ``none`` for a ReMe index whose chunks carry no vector and
    no embedding cache): ReMe searches such a store by keyword only (``search.py``:
    ``vector_search`` returns nothing without an embedding store), so no vector is encoded here
    either; a ``fallbacks`` entry says so. Else ``channels`` itself."""
    if store_vectors != "none" or "dense" not in channels or no_query_vector != "keyword":
        return channels
    fallback(
        "the store holds no vectors (indexed without an embedding model): keyword search only, "
        "as ReMe (dense.no_query_vector=keyword); the dense channel is off"
    )
    return [c for c in channels if c != "dense"]


def embed_run(state, p: EmbedParams, nodes: pl.DataFrame, queries: pl.DataFrame) -> int:
    """The run-wide embed stage: node embeddings (once, content-hash cached) and every query part's
    (``query.plan``) onto ``state`` (a ``context.RunState``); returns the number of texts encoded."""
    if not p.dense:
        return 0
    with state.log.stage("embed"):
        state.encoder, state.cache, state.xb, n1 = corpus_step(
            state.memo, "embed", nodes, lambda: embed_nodes(p, nodes, state.device)
        )
        qplan = p.plan(queries)
        state.xparts, n2 = embed_parts(state, p, nodes, queries, qplan)
        state.part_q, state.part_w = qplan["query_idx"].to_numpy(), qplan["weight"].to_numpy()
    state.log.rows["query_parts"] = qplan.height
    return n1 + n2


def _encodes(state, width: int) -> bool:
    """Whether ``embed.encoder`` is the model (and width) of the nodes' stored vectors."""
    model = state.ds.notes.get("vector_model", "an unnamed model")
    return state.encoder.model_id == model and state.encoder.dim == width


def _own_model(state, width: int, why: str) -> None:
    """Refuse to encode query texts next to stored node vectors of another model or width."""
    model = state.ds.notes.get("vector_model", "an unnamed model")
    enc = state.encoder
    if not _encodes(state, width):
        raise ConfigError(
            f"the nodes carry stored {width}-d vectors of {model!r} (data={state.ds.name}), but "
            f"{why} and embed.encoder is {enc.model_id!r} ({enc.dim}-d): give the queries an "
            f"'embedding' column of that model, or set embed.model_path=<a local copy of {model}> "
            f"embed.encoder.model_id={model} embed.encoder.dim={width}"
        )


def embed_parts(
    state, p: EmbedParams, nodes: pl.DataFrame, queries: pl.DataFrame, qplan: pl.DataFrame
):
    """(vectors of every query part, number of texts encoded): a query's stored ``embedding`` for
    its ``current`` part, the encoder for the rest (see the module docstring for the checks)."""
    xq, have = stored(queries, "query", "query_id")
    texts = qplan["text"].to_list()
    if "embedding" not in nodes.columns:
        if have.any():
            raise ConfigError(
                f"query {queries['query_id'][int(np.flatnonzero(have)[0])]!r} carries a stored "
                "embedding but the nodes do not; give the nodes vectors of the same model (an "
                "'embedding' column) or drop the queries' column"
            )
        return embed_cached(state.encoder, texts, state.cache, state.device)
    width = state.xb.shape[1]
    qi = qplan["query_idx"].to_numpy()
    own = (qplan["part"].to_numpy() == "current") & (have[qi] if len(qi) else False)
    if own.any() and xq.shape[1] != width:
        raise ConfigError(
            f"query vectors are {xq.shape[1]}-d, the nodes' stored vectors {width}-d; use one model"
        )
    out = np.zeros((len(texts), width), np.float32)
    if own.any():
        out[own] = xq[qi[own]]
    todo = np.flatnonzero(~own)
    if not len(todo):
        return out, 0
    if p.no_query_vector == "keyword" and not _encodes(state, width):
        fallback(
            f"the nodes carry stored {width}-d vectors of "
            f"{state.ds.notes.get('vector_model', 'an unnamed model')!r} and embed.encoder is "
            f"another model: queries without a stored 'embedding' search by keyword only "
            "(dense.no_query_vector=keyword, ReMe's fallback when no embedding model answers)"
        )
        return out, 0  # zero rows: DenseChannel.hits returns nothing for them
    first = queries["query_id"][int(qi[todo[0]])]
    _own_model(
        state, width, f"query {first!r} needs its text embedded ({qplan['part'][int(todo[0])]})"
    )
    vecs, n = embed_cached(state.encoder, [texts[i] for i in todo], state.cache, state.device)
    out[todo] = vecs
    return out, n
