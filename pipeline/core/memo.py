"""Memo and cache keys: a table's ordered digest, the per-node-table memo of a run (and its
scope: one recipe, one set of edges, one signals file), and the stage cache keys."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.contract import io
from pipeline.core import version


def table_digest(frame: pl.DataFrame) -> bytes:
    """SHA-256 of a table in row order: its column names and dtypes, its shape, and each row's
    hash over every column (``hash_rows``), in row order. Two tables with the same rows in another
    order get other digests (a sum of row hashes would not)."""
    h = hashlib.sha256(repr((frame.shape, list(frame.schema.items()))).encode())
    h.update(frame.hash_rows(seed=0).to_numpy().tobytes())
    return h.digest()


def memo_scope(
    memo: dict | None, recipe: str, edges: pl.DataFrame | None, signals_path: str | None
) -> dict | None:
    """The part of a caller's ``memo`` that belongs to this ``recipe`` (a hash of the run's config,
    ``querypath.scoped_memo``), these explicit edges and the bytes of the ``signals_path`` table
    (what the per-node-table steps read besides their node table): a memo kept across runs or Ray
    shards never serves a value computed under another recipe, graph or signals file. None stays
    None."""
    if memo is None:
        return None
    sig = signals_path
    key = (
        "scope",
        recipe,
        b"" if edges is None else table_digest(edges),
        hashlib.sha256(Path(sig).read_bytes()).digest() if sig and Path(sig).is_file() else b"",
    )
    return memo.setdefault(key, {})


def corpus_step(memo: dict | None, name: str, nodes: pl.DataFrame, compute):
    """Query-independent work on a node table (embeddings, graph, hubs, signals): computed once per
    node table when ``memo`` is given, keyed by ``name`` and the table's ordered digest
    (:func:`table_digest`: every column, rows in order). A Ray worker keeps one memo across the
    shards it runs (:func:`memo_scope` of its config and edges)."""
    if memo is None:
        return compute()
    key = (name, table_digest(nodes))
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def stage_key(
    prefix: bytes, nodes: pl.DataFrame, queries: pl.DataFrame, segments: tuple = ()
) -> str:
    """Fingerprint of a stage's inputs: ``prefix`` (:func:`key_prefix`: the config keys it reads,
    the input files, the code and polars versions), the node and query tables (every column, rows
    in order: :func:`table_digest`) and how a pack cuts them into segments (``segments``: the node
    and query counts of each). Finished stages are cached under it and reused by a rerun."""
    h = hashlib.sha256(prefix)
    for frame in (nodes, queries):  # in row order: the cached value holds row positions
        h.update(table_digest(frame))
    h.update(repr(segments).encode())
    return h.hexdigest()[:20]


def key_prefix(cfg: DictConfig, ds, keys: list[str]) -> bytes:
    """The part of :func:`stage_key` that does not depend on the group: config keys, data config,
    input files, code version."""
    parts = [
        io.config_hash(
            {
                k: OmegaConf.to_container(cfg[k], resolve=True)
                if OmegaConf.is_config(cfg[k])
                else cfg[k]
                for k in keys
            }
        ),
        io.config_hash(OmegaConf.to_container(cfg.data, resolve=True)),
        io.config_hash(sorted(ds.fingerprints.items())),
        version.code_version(),
        pl.__version__,  # row hashes (table_digest) are polars's own
    ]
    return "".join(parts).encode()
