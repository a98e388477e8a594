"""Steps of a run that ``recall analyze`` replays on a finished run, so an analysis asked for
afterwards is the table the run would have written: the query vectors, the channels' candidate set
(cached under ``stage_key``) and the residual-novelty table of ``novelty=bme``.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl
import yaml
from omegaconf import DictConfig, OmegaConf

from pipeline import io, version
from pipeline.stages import channels, fuse, novelty, query
from pipeline.stages.embed import embed_cached

log = logging.getLogger(__name__)
CONF = Path(__file__).resolve().parents[1] / "conf"
CHANNEL_KEYS = ["channels", "dense", "lexical", "embed", "query", "include_archived", "seed"]


def stage_key(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, keys: list[str]) -> str:
    """Fingerprint of a stage's inputs: the config keys it reads, the input files, the node and
    query tables, the code version. Finished stages are cached under it and reused by a rerun."""
    h = hashlib.sha256(io.config_hash({k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k])
                                       else cfg[k] for k in keys}).encode())
    h.update(io.config_hash(OmegaConf.to_container(cfg.data, resolve=True)).encode())
    h.update(io.config_hash(sorted(ds.fingerprints.items())).encode())
    h.update(version.code_version().encode())
    for frame in (nodes, queries):
        h.update(str(frame.hash_rows(seed=0).sum()).encode() + str(frame.shape).encode())
    return h.hexdigest()[:20]


class QueryVectors(NamedTuple):
    parts: np.ndarray  # (n_parts, d): one vector per query part (context blend, intent split)
    part_q: np.ndarray  # query index of each part
    part_w: np.ndarray  # weight of each part
    xq: np.ndarray  # (n_queries, d): each query's current text (rewrite) vector
    n_embedded: int  # texts actually encoded (cache misses)
    n_parts: int


def query_vectors(cfg: DictConfig, queries: pl.DataFrame, encoder, cache, device: str) -> QueryVectors:
    qplan = query.plan(queries, cfg.query.blend, cfg.query.intent_split, tuple(cfg.query.weights),
                       cfg.query.max_segments)
    parts, n = embed_cached(encoder, qplan["text"].to_list(), cache, device)
    part_q, part_w = qplan["query_idx"].to_numpy(), qplan["weight"].to_numpy()
    first = np.r_[0, np.flatnonzero(np.diff(part_q)) + 1]
    return QueryVectors(parts, part_q, part_w, parts[first], n, qplan.height)


def candidates(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, enabled: list[str], xb,
               parts, part_q, part_w, device: str) -> tuple[pl.DataFrame, bool]:
    """(the channels' candidate set, whether it came from the cache under ``stage_key``)."""
    path = Path(cfg.cache_dir) / "candidates" / f"{stage_key(cfg, ds, nodes, queries, CHANNEL_KEYS)}.parquet"
    if path.exists():
        return pl.read_parquet(path), True
    cand = channels.generate(nodes, queries, enabled, xb, parts, channels.DenseParams(**cfg.dense),
                             channels.LexicalParams(**OmegaConf.to_container(cfg.lexical)), device,
                             cfg.seed, cfg.include_archived, part_q, part_w)
    io.write_parquet(path, cand)
    return cand, False


def bme_novelty(cfg: DictConfig) -> novelty.NoveltyParams:
    """``novelty=bme``'s settings (conf/novelty/bme.yaml) with the run's own novelty keys over them."""
    conf = yaml.safe_load((CONF / "novelty" / "bme.yaml").read_text())
    conf |= {k: v for k, v in OmegaConf.to_container(cfg.novelty, resolve=True).items() if k != "enabled"}
    return novelty.NoveltyParams(**{k: v for k, v in conf.items() if k != "seed_diffusion"})


def novelty_table(cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, encoder, cache, xb,
                  device: str) -> pl.DataFrame | None:
    """The ``novelty.parquet`` a run of ``cfg`` with ``novelty=bme`` writes (None without the dense
    channel, whose hits are the novelty basis)."""
    enabled = list(cfg.channels)
    if "dense" not in enabled:
        log.warning("no novelty analysis: the run has no dense channel (its hits are the novelty basis)")
        return None
    qv = query_vectors(cfg, queries, encoder, cache, device)
    cand, _hit = candidates(cfg, ds, nodes, queries, enabled, xb, qv.parts, qv.part_q, qv.part_w, device)
    params = OmegaConf.to_container(cfg.fusion, resolve=True)
    cand = fuse.fuse(cand, enabled, params["method"], **{k: v for k, v in params.items() if k != "method"})
    table, _hits = novelty.run(cand, nodes, queries, xb, qv.xq, bme_novelty(cfg), device, cfg.include_archived)
    return table
