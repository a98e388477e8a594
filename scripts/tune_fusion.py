"""Grid over fusion settings on one dataset, reusing one candidate set (channels run once).

    .venv/bin/python scripts/tune_fusion.py data=musique
prints one row per setting (recall@2/5/10, ndcg@10), best first by the mean of those four.
Any Hydra override of `recall run` is accepted (the grid is in GRID below).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from pipeline.channels import candidates
from pipeline.contract import ingest
from pipeline.core import backend, common
from pipeline.stages import channels, evaluate, fuse
from pipeline.stages.embed import embed_cached
from pipeline.stages.select import SelectParams, recall_rows, select
from pipeline.stages.vectors import embed_nodes

CONF = str(Path(__file__).resolve().parents[1] / "conf")
GRID = {
    "lexical_weight": [0.15, 0.25, 0.35, 0.5, 0.65],
    "dense_norm": ["none", "max"],
    "lexical_norm": ["max", "minmax"],
}
METRICS = ["recall@2", "recall@5", "recall@10", "ndcg@10"]


def main(overrides: list[str]) -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=["preset=best", *overrides])
    device = backend.resolve_device(cfg.device)
    ds = common.call_target(cfg.data)
    nodes, queries = ingest.drop_empty(ds)
    enc, cache, xb, _ = embed_nodes(cfg, nodes, device)
    xq, _ = embed_cached(enc, queries["text"].to_list(), cache, device)
    cand = candidates.generate(
        nodes,
        queries,
        ["dense", "lexical"],
        xb,
        xq,
        channels.DenseParams.from_cfg(cfg.dense),
        channels.LexicalParams.from_cfg(cfg.lexical),
        device,
        cfg.seed,
    )
    rows = []
    for lw, dn, ln in itertools.product(*GRID.values()):
        fused = fuse.fuse(
            cand,
            ["dense", "lexical"],
            "wsum",
            weights={"dense": 1 - lw, "lexical": lw},
            norm={"dense": dn, "lexical": ln},
        )
        rec = recall_rows(
            select(fused.with_columns(score=fused["fused"]), int(cfg.k), SelectParams.defaults()),
            nodes,
            queries,
            ["dense", "lexical"],
        )
        m = evaluate.evaluate_run(
            rec, ds.qrels, queries.drop("group", strict=False), ds.qrels_level, METRICS
        )
        rows.append((sum(m[x] for x in METRICS) / len(METRICS), lw, dn, ln, m))
    for score, lw, dn, ln, m in sorted(rows, key=lambda r: -r[0]):
        print(
            f"lexical_weight={lw:<5} dense_norm={dn:<5} lexical_norm={ln:<7} mean={score:.4f} "
            + " ".join(f"{x}={m[x]:.4f}" for x in METRICS)
        )


if __name__ == "__main__":
    main(sys.argv[1:])
