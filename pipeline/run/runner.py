"""``recall run``: ingest, recall every query (locally or on Ray shards), write the outputs.

The stages themselves are listed in ``pipeline.run.querypath.STAGES`` and share one interface
(``pipeline.core.stage``); docs/architecture.md walks the whole path.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from pipeline.contract import rundir
from pipeline.contract.dataset import require_queries
from pipeline.contract.ingest import nodes_and_queries
from pipeline.contract.registry import call_target
from pipeline.core import backend
from pipeline.core.stagelog import StageLog
from pipeline.run import clock, querypath
from pipeline.run.outputs import write_outputs
from pipeline.run.querypath import keyword_store


def run(cfg: DictConfig, out_dir: str | Path, dataset=None, memo: dict | None = None) -> dict:
    """Run every stage; ``dataset`` (a ``Dataset``) replaces ``cfg.data`` when given (tests, API use);
    ``memo`` keeps the per-node-table steps between runs over the same nodes (``memo.corpus_step``).
    Returns {out_dir, metrics, manifest}."""
    cfg = clock.resolve(cfg)  # default_now: start → this run's start (the manifest's config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rundir.clear(out_dir, cfg)  # the manifest first, then every output a previous run left here
    log = StageLog()
    backend.reset()
    device = backend.resolve_device(cfg.device)
    with log.stage("ingest"):
        ds = dataset if dataset is not None else call_target(cfg.data)
        cfg = keyword_store(cfg, ds)
        nodes, queries = nodes_and_queries(ds, cfg.get("query_part"))
    log.rows |= {
        "nodes": nodes.height,
        "queries": queries.height,
        "edges": 0 if ds.edges is None else ds.edges.height,
    }
    require_queries(cfg.data.name, queries)
    if (
        cfg.get("executor", "local") != "local"
    ):  # query shards on Ray workers: pipeline/run/executor.py
        from pipeline.run import executor

        got = executor.run_shards(cfg, ds, nodes, queries, log, device)
    else:
        got = querypath.recall_queries(cfg, ds, nodes, queries, device, log, memo)
    return write_outputs(cfg, out_dir, ds, nodes, queries, got, log, device)
