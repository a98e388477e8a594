"""Helpers every layer shares and that import no stage: calling a registered target, the stage
log (seconds and row counts), memoised per-node-table work, stage cache keys, versions, memory."""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import time
from contextlib import contextmanager
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.contract import io, registry
from pipeline.core import backend, version

log = logging.getLogger("pipeline.run.runner")
VERSIONS = (
    "recall-pipeline",
    "numpy",
    "polars",
    "pyarrow",
    "torch",
    "bm25s",
    "rjieba",
    "jieba",
    "pytrec-eval-terrier",
    "sentence-transformers",
    "hydra-core",
)


def call_target(spec: DictConfig | dict, where: str | None = None, **extra):
    """Call the registered callable named by ``spec._target_`` (``pipeline.contract.registry``) with the
    remaining keys as kwargs; ``where`` names the config key for errors (default: the node's key)."""
    if where is None:
        where = (spec._get_full_key(None) if isinstance(spec, DictConfig) else None) or "config"
    spec = OmegaConf.to_container(spec, resolve=True) if isinstance(spec, DictConfig) else spec
    return registry.call(spec, where, **extra)


def host_column(name: str, values, valid=None) -> pl.Series:
    """A Float64 column of ``values`` (numpy, or CuPy brought to the host in one transfer), null
    where ``valid`` (the same namespace, or None: every value defined) is False."""
    out = pl.Series(name, backend.to_host(values), dtype=pl.Float64)
    if valid is None:
        return out
    ok = backend.to_host(valid)
    return out if ok.all() else pl.select(pl.when(pl.Series(ok)).then(out)).to_series()


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports ru_maxrss in KiB)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def versions() -> dict[str, str]:
    """Versions of the main packages, and of the FAISS / CuPy / cuGraph distributions actually imported."""
    out = backend.distributions()
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    out["recall-pipeline-code"] = version.code_version()  # package version + hash of the source
    return out


class StageLog:
    """Seconds per stage and row counts of a run (the manifest's ``timings_s`` and ``rows``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rows: dict[str, int] = {}

    @contextmanager
    def stage(self, name: str):
        """Time the body as stage ``name``; a stage that runs once per query group adds up."""
        io.fault_point(f"stage:{name}")
        t0 = time.perf_counter()
        log.info("stage %s ...", name)
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 4)

    def add(self, name: str, n: int) -> None:
        """A per-query count: summed over groups (and over Ray shards)."""
        self.rows[name] = self.rows.get(name, 0) + int(n)

    def most(self, name: str, n: int) -> None:
        """A per-group size (graph edges, hubs): the largest group's, whichever way queries were split."""
        self.rows[name] = max(self.rows.get(name, 0), int(n))


def table_digest(frame: pl.DataFrame) -> bytes:
    """SHA-256 of a table in row order: its column names and dtypes, its shape, and each row's
    hash over every column (``hash_rows``), in row order. Two tables with the same rows in another
    order get other digests (a sum of row hashes would not)."""
    h = hashlib.sha256(repr((frame.shape, list(frame.schema.items()))).encode())
    h.update(frame.hash_rows(seed=0).to_numpy().tobytes())
    return h.digest()


def memo_scope(memo: dict | None, cfg: DictConfig, edges: pl.DataFrame | None) -> dict | None:
    """The part of a caller's ``memo`` that belongs to this config, these explicit edges and the
    bytes of a ``signals.path`` table (what the per-node-table steps read besides their node
    table): a memo kept across runs or Ray shards never serves a value computed under another
    recipe, graph or signals file. None stays None."""
    if memo is None:
        return None
    conf = OmegaConf.to_container(cfg, resolve=True)
    conf = {k: v for k, v in conf.items() if k not in ("out_dir", "report")}
    sig = cfg.signals.get("path") if cfg.signals.get("enabled") else None
    key = (
        "scope",
        io.config_hash(conf),
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
    cfg: DictConfig,
    ds,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    keys: list[str],
    prefix: bytes | None = None,
    segments: tuple = (),
) -> str:
    """Fingerprint of a stage's inputs: the config keys it reads, the input files, the node and
    query tables (every column, rows in order: :func:`table_digest`), how a pack cuts them into
    segments (``segments``: the node and query counts of each), the code and polars versions.
    Finished stages are cached under it and reused by a rerun. ``prefix`` is :func:`key_prefix`
    of (cfg, ds, keys) when the caller has it already."""
    h = hashlib.sha256(key_prefix(cfg, ds, keys) if prefix is None else prefix)
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
