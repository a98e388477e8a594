"""docs/architecture.md, "Adding a stage": a toy stage written here, registered after ``score``,
configured by its own group and run end to end; it moves a chosen node to rank 1."""

from dataclasses import dataclass

import polars as pl
from omegaconf import open_dict

from pipeline.core.stage import Params, Stage
from pipeline.run import querypath, runner


@dataclass
class BoostParams(Params):
    enabled: bool
    node_id: str
    bonus: float


def boost(ctx, p: BoostParams):
    """Add ``bonus`` to the score of one node in every query of the group."""
    hit = ctx.nodes["node_id"].gather(ctx.cand["node_idx"]) == p.node_id
    ctx.cand = ctx.cand.with_columns(score=pl.col("score") + hit.cast(pl.Float64) * p.bonus)
    return ctx


BOOST = Stage("boost", boost, lambda run: BoostParams.from_cfg(run.cfg.boost, "boost"),
              enabled=lambda cfg: bool(cfg.get("boost", {}).get("enabled")))  # fmt: skip


def test_a_toy_stage_is_registered_configured_and_run(compose, tmp_path, monkeypatch):
    monkeypatch.setattr(querypath, "STAGES", querypath.inserted(BOOST, after="score"))
    cfg = compose(["data=sample", "preset=dense", "embed=hashing", "k=3", "report=false"])
    base = pl.read_parquet(runner.run(cfg, tmp_path / "a")["out_dir"] + "/recall.parquet")
    third = base.filter(pl.col("rank") == 3).row(0, named=True)
    with open_dict(cfg):  # its config group: conf/boost/*.yaml for a real stage
        cfg.boost = {"enabled": True, "node_id": third["node_id"], "bonus": 100.0}
    res = runner.run(cfg, tmp_path / "b")
    rows = pl.read_parquet(tmp_path / "b" / "recall.parquet")
    top = rows.filter(pl.col("query_id") == third["query_id"]).row(0, named=True)
    assert (top["node_id"], top["rank"]) == (third["node_id"], 1)
    assert abs(top["score"] - (third["score"] + 100.0)) < 1e-4
    assert "boost" in res["manifest"]["timings_s"]
