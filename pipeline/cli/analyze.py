"""``recall analyze <run_dir>``: the analyses of a finished run, computed afterwards as the run
would have (embeddings and candidates come back from the caches)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.cli.main import parser
from pipeline.contract import io, rundir
from pipeline.contract.errors import ConfigError
from pipeline.contract.ingest import nodes_and_queries
from pipeline.contract.registry import call_target
from pipeline.core import backend
from pipeline.core.stage import group_yaml
from pipeline.core.stagelog import StageLog
from pipeline.run import querypath
from pipeline.run.outputs import write_frames

log = logging.getLogger(__name__)


def main(args: list[str]) -> int:
    """0, after ``recall analyze <run dir>`` wrote the analyses and printed their file names."""
    ap = parser("analyze")
    ap.add_argument("run_dir")
    print("wrote " + ", ".join(analyze_run(ap.parse_args(args).run_dir)))
    return 0


def analyze_run(run_dir: str | Path) -> list[str]:
    """topics / node_topics / recall_topics, and novelty.parquet (``novelty=bme``'s settings) when
    the run did not write it; then the manifest's output list and the report are brought up to date.
    Returns the names of the files written."""
    from pipeline.stages import analyze
    from pipeline.stages.embed import EmbedParams, embed_nodes

    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ConfigError(f"{run_dir}: no manifest.json; pass a finished run directory")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cfg = OmegaConf.create(
        rundir.upgrade_config(manifest["config"], f"{run_dir / 'manifest.json'}: config")
    )
    device = backend.resolve_device(cfg.device)
    ds = call_target(cfg.data, f"{run_dir / 'manifest.json'}: config.data")
    nodes, queries = nodes_and_queries(ds, cfg.get("query_part"))
    xb = embed_nodes(EmbedParams.of_run(cfg), nodes, device)[2]
    a = cfg.get("analyze", {"topics": 20, "top": 5, "mode": "abs"})
    frames = analyze.analyze(
        nodes,
        xb,
        pl.read_parquet(run_dir / "recall.parquet"),
        a["topics"],
        a["top"],
        a["mode"],
        device,
    )
    if not (run_dir / "novelty.parquet").is_file():
        table = novelty_afterwards(cfg, ds, nodes, queries, device)
        if table is not None:
            frames["novelty"] = table
    write_frames(run_dir, frames)
    io.write_json(run_dir / "manifest.json", {**manifest, "outputs": rundir.outputs(run_dir, cfg)})
    from pipeline.report import run_report

    run_report(run_dir)
    return [f"{n}.parquet" for n in frames]


def novelty_afterwards(
    cfg: DictConfig, ds, nodes: pl.DataFrame, queries: pl.DataFrame, device: str
) -> pl.DataFrame | None:
    """The ``novelty.parquet`` a run of ``cfg`` with ``novelty=bme`` writes: ``novelty=bme``'s
    settings (the run's own novelty keys over them), the same query groups, stopped after the
    novelty stage (embeddings and candidates come back from the caches)."""
    if "dense" not in cfg.channels:
        log.warning(
            "no novelty analysis: the run has no dense channel (its hits are the novelty basis)"
        )
        return None
    conf = group_yaml("novelty", "bme")
    conf |= {
        k: v for k, v in OmegaConf.to_container(cfg.novelty, resolve=True).items() if k != "enabled"
    }
    cfg = OmegaConf.merge(cfg, {"novelty": conf})
    return querypath.recall_queries(
        cfg, ds, nodes, queries, device, StageLog(), until="novelty"
    ).novelty
