"""Everything a run writes after recall, once per run on the driver whichever executor computed
it: novelty and signals tables, recall (and injection), analysis, evaluation, the manifest (last)
and the report (a view of the finished run, after the manifest)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.contract import io, rundir
from pipeline.core import backend
from pipeline.core.stagelog import StageLog, peak_rss_mb
from pipeline.core.version import versions


def write_frames(out_dir: Path, frames: dict[str, pl.DataFrame]) -> None:
    """``<name>.parquet`` for each frame (atomic writes)."""
    for name, frame in frames.items():
        io.write_parquet(Path(out_dir) / f"{name}.parquet", frame)


def export(
    cfg: DictConfig,
    out_dir: Path,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    got,
    edges: pl.DataFrame | None = None,
    log: pl.DataFrame | None = None,
    ds=None,
) -> None:
    """novelty / signals tables, recall.parquet and (``inject.format``) injection.parquet; the
    injection layer's collaborative boost reads ``log`` (``Dataset.use_log``), OKS's preview and
    ReMe's link expansion the store ``ds`` (its ``settings`` and ``tables``)."""
    from pipeline.inject import formats
    from pipeline.stages.select import with_node_text

    if got.novelty is not None:
        io.write_parquet(out_dir / "novelty.parquet", got.novelty)
    if got.signals is not None and cfg.signals.path is None:
        io.write_parquet(out_dir / "signals.parquet", got.signals)
    io.write_parquet(out_dir / "recall.parquet", with_node_text(got.recall, nodes))
    if cfg.inject.format != "none":
        io.write_parquet(
            out_dir / "injection.parquet",
            formats.render(
                got.recall,
                nodes,
                cfg.inject.format,
                queries=queries,
                include_archived=bool(cfg.include_archived),
                edges=edges,
                log=log,
                store=ds,
                **{k: v for k, v in cfg.inject.items() if k != "format"},
            ),
        )


def evaluate(
    cfg: DictConfig, out_dir: Path, ds, nodes: pl.DataFrame, queries: pl.DataFrame, recall
) -> dict:
    """metrics.json and per_query.parquet against the dataset's qrels (those of the run's queries)."""
    from pipeline.metrics import evaluate as ev

    qrels = (
        ds.qrels.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
        if cfg.get("query_part")
        else ds.qrels
    )
    metrics, per_query = ev.evaluate(
        recall, qrels, queries, ds.qrels_level, cfg.evaluate.metrics, nodes
    )
    io.write_json(out_dir / "metrics.json", metrics)
    io.write_parquet(out_dir / "per_query.parquet", per_query)
    return metrics


def tier_counts(signals: pl.DataFrame | None) -> dict:
    """Memory-curve tiers of the signals table (OKS: hot ≥ 0.7, warm ≥ 0.4, cold ≥ 0.15, else
    evictable) as {tier: nodes}, in that order; {} without a tier column."""
    if signals is None or "tier" not in signals.columns:
        return {}
    counts = dict(signals["tier"].value_counts().iter_rows())
    return {t: int(counts.get(t, 0)) for t in ("hot", "warm", "cold", "evictable")}


def manifest(cfg: DictConfig, out_dir: Path, ds, got, log: StageLog, device: str) -> dict:
    """The run's manifest: config, inputs, versions, device, timings, row counts, outputs."""
    container = OmegaConf.to_container(cfg, resolve=True)
    return {
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": container,
        "config_hash": io.config_hash(container),
        "dataset": ds.name,
        "inputs": ds.fingerprints,
        "versions": versions(),
        "device": device,
        "executor": got.executor or {"name": "local"},
        "timings_s": log.seconds,
        "rows": log.rows,
        "skipped": {k: v for k, v in sorted(ds.skipped.items()) if v},
        "data_notes": dict(ds.notes),
        "fallbacks": backend.FALLBACKS[:],
        "graph_algorithms": dict(backend.GRAPH_IMPL),
        "embedded_texts": got.n_embedded,
        "reused_stages": got.reused,
        "peak_rss_mb": peak_rss_mb(),
        "signals_freshness": {
            **got.freshness,
            **({"store": ds.freshness} if ds.freshness else {}),
        },
        **({"tiers": tier_counts(got.signals)} if tier_counts(got.signals) else {}),
        "outputs": rundir.outputs(out_dir, cfg),
        **({"auto": got.auto} if got.auto is not None else {}),
    }


def write_outputs(
    cfg: DictConfig,
    out_dir: Path,
    ds,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    got,
    log: StageLog,
    device: str,
) -> dict:
    """Export, analysis, evaluation, the manifest (last) and the report; ``got`` is the
    ``querypath.Recalled`` of the run. Returns {out_dir, metrics, manifest}."""
    from pipeline.stages import analyze

    with log.stage("export"):
        export(cfg, out_dir, nodes, queries, got, getattr(ds, "edges", None), ds.use_log(), ds)
    if cfg.analyze.enabled and got.xb is not None:
        with log.stage("analyze"):
            write_frames(
                out_dir,
                analyze.analyze(
                    nodes,
                    got.xb,
                    got.recall,
                    cfg.analyze.topics,
                    cfg.analyze.top,
                    cfg.analyze.mode,
                    device,
                ),
            )
    metrics = None
    if ds.qrels is not None and ds.qrels.height:
        with log.stage("evaluate"):
            metrics = evaluate(cfg, out_dir, ds, nodes, queries, got.recall)
    man = manifest(cfg, out_dir, ds, got, log, device)
    io.write_json(out_dir / "manifest.json", man)
    if cfg.report:
        from pipeline.report import run_report

        with log.stage("report"):
            run_report(out_dir)
    return {"out_dir": str(out_dir), "metrics": metrics, "manifest": man}
