"""Corpus topic model: two clear clusters become two topics with the right members and terms."""

import numpy as np
import polars as pl

from pipeline.stages.analyze import analyze


def test_two_clusters_two_topics():
    rng = np.random.default_rng(0)
    a, b = np.zeros(16), np.zeros(16)
    a[:8], b[8:] = 1.0, 1.0
    xb = np.stack(
        [a + 0.05 * rng.random(16) for _ in range(6)]
        + [b + 0.05 * rng.random(16) for _ in range(6)]
    )
    xb = (xb / np.linalg.norm(xb, axis=1, keepdims=True)).astype(np.float32)
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(12)],
            "text": ["apple orchard harvest"] * 6 + ["rocket launch orbit"] * 6,
        }
    )
    recall = pl.DataFrame({"query_id": ["q"] * 3, "node_id": ["n0", "n1", "n7"], "rank": [1, 2, 3]})
    out = analyze(nodes, xb, recall, k=2, top=3)
    nt = out["node_topics"]
    first, second = set(nt["topic"][:6]), set(nt["topic"][6:])
    assert len(first) == 1 and len(second) == 1 and first != second
    assert nt["share"].min() > 0.8
    t = out["topics"].sort("topic")
    assert sorted(t["size"].to_list()) == [6, 6]
    apple_topic = nt["topic"][0]
    assert set(t.filter(pl.col("topic") == apple_topic)["top_terms"][0]) == {
        "apple",
        "orchard",
        "harvest",
    }
    rt = out["recall_topics"].row(0, named=True)
    assert (
        rt["n_topics"] == 2
        and rt["main_topic"] == apple_topic
        and abs(rt["main_share"] - 2 / 3) < 1e-9
    )


def test_analyze_stage_and_command_on_a_run(compose, tmp_path):
    from pipeline.cli.main import main
    from pipeline.run import runner

    cfg = compose(["embed=hashing", "analyze.enabled=true", "analyze.topics=4", "report=false"])
    runner.run(cfg, tmp_path / "run")
    topics = pl.read_parquet(tmp_path / "run" / "topics.parquet")
    nodes = pl.read_parquet(tmp_path / "run" / "node_topics.parquet")
    assert topics.height == 4 and topics["size"].sum() == nodes.height
    assert pl.read_parquet(tmp_path / "run" / "recall_topics.parquet").height == 30
    (tmp_path / "run" / "topics.parquet").unlink()
    assert main(["analyze", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "topics.parquet").exists() and (
        tmp_path / "run" / "report.md"
    ).exists()


def test_analyze_after_a_run_without_novelty_writes_the_table_novelty_bme_writes(compose, tmp_path):
    import json

    from pipeline.cli.main import main
    from pipeline.run import runner

    base = ["embed=hashing", "report=false", "data.limit_queries=8"]
    runner.run(compose(base), tmp_path / "plain")
    cfg = compose([*base, "novelty=bme"])
    cfg.cache_dir = str(
        tmp_path / "own-cache"
    )  # computes its candidates itself, not from the plain run's cache
    runner.run(cfg, tmp_path / "bme")
    assert not (tmp_path / "plain" / "novelty.parquet").exists()
    assert main(["analyze", str(tmp_path / "plain")]) == 0
    after = pl.read_parquet(tmp_path / "plain" / "novelty.parquet")
    during = pl.read_parquet(tmp_path / "bme" / "novelty.parquet")
    assert (
        during.height == 8 and during["novelty"].is_not_null().sum() > 0
    )  # the table is not trivially empty
    assert after.equals(during)
    outputs = json.loads((tmp_path / "plain" / "manifest.json").read_text())["outputs"]
    assert {"novelty.parquet", "topics.parquet", "recall.parquet"} <= set(outputs)
