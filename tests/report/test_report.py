"""Reports: TREC files (round trip, malformed lines, trec_eval parity with metrics.json), run comparison
with paired t-tests, plots and the markdown/HTML reports."""

import json
import math
import warnings

import polars as pl
import pytest

from pipeline.contract import registry
from pipeline.contract.errors import ConfigError, DataError
from pipeline.metrics.evaluate import DEFAULT_METRICS, first_occurrence
from pipeline.report import (
    compare,
    compare_dir,
    compare_report,
    format_table,
    import_run,
    plots,
    read_qrels,
    read_run,
    run_report,
    write_qrels,
    write_run,
)
from pipeline.run import runner
from tests.helpers.paths import REPO, SHARED_DATA

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
METRICS = list(DEFAULT_METRICS)


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory, cache_dir):
    """Two finished runs on the bundled sample: bm25 (tied scores) and dense, both with hashing embeddings."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    root = tmp_path_factory.mktemp("runs")
    out = {}
    for preset in ("bm25", "dense"):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = hcompose(
                "config",
                overrides=[
                    "device=cpu",
                    f"out_dir={root / preset}",
                    f"cache_dir={cache_dir}",
                    f"data_dir={SHARED_DATA}",
                    "embed=hashing",
                    f"preset={preset}",
                ],
            )
        runner.run(cfg, root / preset, dataset=None)
        out[preset] = root / preset
    return out


def _recall() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "query_id": ["q1", "q1", "q1", "q1", "q2"],
            "rank": [1, 2, 3, 4, 1],
            "node_id": ["a.md#x", "b.md#y", "a.md#z", "c.md", "b.md#y"],
            "doc_id": ["a.md", "b.md", "a.md", "c.md", "b.md"],
            "score": [3.5, 2.25, 2.0, 0.125, 1e-20],
        },
        schema_overrides={"rank": pl.Int32},
    )


def _metrics_json(run_dir) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


# --- TREC files -------------------------------------------------------------------------------


def test_trec_run_round_trip_node_level(tmp_path):
    path = write_run(_recall(), tmp_path / "run.txt", tag="mine")
    lines = path.read_text().splitlines()
    assert lines[0] == "q1 Q0 a.md#x 1 3.5 mine" and lines[-1] == "q2 Q0 b.md#y 1 1e-20 mine"
    back = read_run(path)
    assert back.columns == ["query_id", "node_id", "rank", "score"]
    assert back.equals(_recall().select("query_id", "node_id", "rank", "score"))


def test_trec_run_doc_level_keeps_first_unit_and_reranks(tmp_path):
    path = write_run(_recall(), tmp_path / "run.txt", tag="mine", level="doc_id")
    assert path.read_text().splitlines() == [
        "q1 Q0 a.md 1 3.5 mine",
        "q1 Q0 b.md 2 2.25 mine",
        "q1 Q0 c.md 3 0.125 mine",
        "q2 Q0 b.md 1 1e-20 mine",
    ]
    back = read_run(path, level="doc_id")
    assert back["doc_id"].to_list() == ["a.md", "b.md", "c.md", "b.md"] and back[
        "rank"
    ].to_list() == [1, 2, 3, 1]


def test_trec_tied_and_non_monotone_scores_keep_rank_order(tmp_path):
    # q1: a tie at ranks 1-2, then rank 4 scored above rank 3 (as select=dpp|mmr can rank them)
    odd = _recall().with_columns(score=pl.Series([2.0, 2.0, 1.0, 1.5, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = write_run(odd, tmp_path / "odd.txt", tag="t")
    back = read_run(path)
    # one float32 step (trec_eval's score type) below the score written above: 2 - 2**-23, 1 - 2**-24
    assert back["score"].to_list() == [2.0, 2.0 - 2**-23, 1.0, 1.0 - 2**-24, 1.0]  # q2 untouched
    q1 = back.filter(pl.col("query_id") == "q1")
    by_score = q1.sort("score", descending=True)["node_id"].to_list()
    assert by_score == q1.sort("rank")["node_id"].to_list()  # sorting by score = the rank order
    path = write_run(odd, tmp_path / "rank.txt", tag="t", score="rank")
    back = read_run(path)
    assert back["score"].to_list() == [1.0, 0.5, pytest.approx(1 / 3), 0.25, 1.0]


def test_trec_qrels_round_trip(tmp_path):
    qrels = pl.DataFrame(
        {"query_id": ["q2", "q1", "q1"], "doc_id": ["b.md", "a.md", "c.md"], "relevance": [1, 2, 0]}
    )
    path = write_qrels(qrels, tmp_path / "qrels.txt")
    assert path.read_text().splitlines() == ["q1 0 a.md 2", "q1 0 c.md 0", "q2 0 b.md 1"]
    back = read_qrels(path, level="doc_id")
    assert back.columns == ["query_id", "doc_id", "relevance"]
    assert back.sort("query_id", "doc_id").equals(
        qrels.sort("query_id", "doc_id").cast({"relevance": pl.Int32})
    )


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4\n",
            r"row 2: 5 fields .* expected 6; fix: write each line as 'q_id Q0",
        ),
        ("q1 Q0 a one 0.5 t\n", r"row 1, field 'rank': rank 'one' is not an integer"),
        ("q1 Q0 a 1 high t\n", r"row 1, field 'score': score 'high' is not a number"),
        ("q1 Q0 a 0 0.5 t\n", r"rank 0 is below 1"),
        ("q1 Q0 a 1 0.5 t\nq1 Q0 a 2 0.4 t\n", r"row 2: doc 'a' appears twice for query 'q1'"),
        ("\n\n", r"the file has no lines"),
    ],
)
def test_read_run_malformed_line_names_file_line_and_fix(tmp_path, text, match):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(DataError, match=match) as err:
        read_run(path)
    assert str(path) in str(err.value) and "fix:" in str(err.value)


def test_read_qrels_malformed_and_missing(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 a 1\nq1 0 b yes\n")
    with pytest.raises(DataError, match=r"qrels.txt, row 2, field 'relevance'"):
        read_qrels(path)
    with pytest.raises(DataError, match="file not found"):
        read_qrels(tmp_path / "nope.txt")


def test_trec_rejects_ids_with_spaces_and_bad_tag(tmp_path):
    bad = _recall().with_columns(node_id=pl.lit("a b"))
    with pytest.raises(DataError, match="contains whitespace"):
        write_run(bad, tmp_path / "run.txt", tag="t")
    with pytest.raises(ConfigError, match="tag"):
        write_run(_recall(), tmp_path / "run.txt", tag="two words")
    with pytest.raises(ConfigError, match="choose from"):
        write_run(_recall(), tmp_path / "run.txt", tag="t", level="unit")


def test_export_trec_then_trec_eval_reproduces_metrics_json(sample_runs, tmp_path, capsys):
    import pytrec_eval

    from pipeline.cli.main import main
    from pipeline.metrics.evaluate import trec_key

    ds = registry.call_target(
        json.loads((sample_runs["dense"] / "manifest.json").read_text())["config"]["data"]
    )
    assert ds.qrels_level == "doc_id"
    with (write_qrels(ds.qrels, tmp_path / "qrels.txt")).open() as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    for preset in ("bm25", "dense"):
        # bm25 has tied scores; export-trec writes the scores, a tie nudged one float32 step down,
        # so trec_eval (which sorts by its float32 scores) sees exactly our order
        path = tmp_path / f"{preset}.txt"
        assert main(["export-trec", str(sample_runs[preset]), str(path), "--level", "doc_id"]) == 0
        with path.open() as fh:
            run = pytrec_eval.parse_run(fh)
        stored = first_occurrence(
            pl.read_parquet(sample_runs[preset] / "recall.parquet"), "doc_id", "score"
        )
        written = read_run(path, level="doc_id").join(stored, on=["query_id", "doc_id"])
        assert (written["rank"] == written["rank_right"]).all()
        diff = (written["score"] - written["score_right"]).abs()
        # the real scores (a nudged one within a few float32 steps of it; of 0: a denormal)
        assert (diff <= 1e-6 * written["score_right"].abs() + 1e-30).all()
        tied = stored.filter(pl.col("score").diff().over("query_id") == 0).height
        changed = written.filter(pl.col("score") != pl.col("score_right")).height
        assert changed >= tied and (tied > 0 or preset == "dense")  # bm25: the nudge is exercised
        res = pytrec_eval.RelevanceEvaluator(
            qrels, {"recall.1,2,5,10,25,50", "ndcg_cut.10", "recip_rank", "P.5"}
        )
        per_q = res.evaluate(run)
        judged = {q for q, d in qrels.items() if any(r > 0 for r in d.values())}
        expected = _metrics_json(sample_runs[preset])
        assert expected["n_queries"] == len(judged) == 30
        for m in METRICS:
            mean = sum(per_q.get(q, {}).get(trec_key(m), 0.0) for q in judged) / len(judged)
            assert mean == pytest.approx(expected[m], abs=1e-12), (preset, m)
    assert "wrote" in capsys.readouterr().out


def test_import_run_reproduces_metrics_and_compares_with_native_run(sample_runs, tmp_path):
    ds = registry.call_target(
        json.loads((sample_runs["bm25"] / "manifest.json").read_text())["config"]["data"]
    )
    recall = pl.read_parquet(sample_runs["bm25"] / "recall.parquet")
    run_file = write_run(recall, tmp_path / "bm25.txt", tag="bm25", level="doc_id", score="rank")
    qrels_file = write_qrels(ds.qrels, tmp_path / "qrels.txt")
    out = import_run(run_file, tmp_path / "imported", qrels_file, level="doc_id")
    got, want = _metrics_json(out), _metrics_json(sample_runs["bm25"])
    assert (
        all(got[m] == pytest.approx(want[m], abs=1e-12) for m in METRICS) and got["n_queries"] == 30
    )
    res = compare(
        [sample_runs["bm25"], out]
    )  # native run reloads the dataset, imported one reads qrels.txt
    assert res.table.filter(pl.col("run") == "imported")["ndcg@10"][0] == pytest.approx(
        want["ndcg@10"], abs=1e-12
    )
    assert res.table.filter(pl.col("run") == "imported")["ndcg@10_p"][0] == 1.0


# --- compare ----------------------------------------------------------------------------------


def test_compare_two_runs_matches_metrics_json(sample_runs):
    res = compare([sample_runs["bm25"], sample_runs["dense"]])
    assert res.runs == ["bm25", "dense"] and res.baseline == "bm25" and res.metrics == METRICS
    assert res.table.columns == ["run", "n_queries", *METRICS, *[f"{m}_p" for m in METRICS]]
    for name in res.runs:
        row = res.table.filter(pl.col("run") == name).row(0, named=True)
        expected = _metrics_json(sample_runs[name])
        assert row["n_queries"] == expected["n_queries"] == 30
        for m in METRICS:
            assert row[m] == pytest.approx(expected[m], abs=1e-12), (name, m)
        for g, table in res.groups.items():
            grow = table.filter(pl.col("run") == name).row(0, named=True)
            assert grow["n_queries"] == expected["by_group"][g]["n_queries"]
            assert grow["ndcg@10"] == pytest.approx(expected["by_group"][g]["ndcg@10"], abs=1e-12)
    assert set(res.groups) == set(_metrics_json(sample_runs["bm25"])["by_group"])
    base, other = res.table.row(0, named=True), res.table.row(1, named=True)
    assert base["ndcg@10_p"] is None and 0.0 <= other["ndcg@10_p"] <= 1.0
    text = format_table(res)
    assert (
        "| bm25 (baseline) | 30 |" in text and "### multi-hop" in text and "paired t-test" in text
    )
    assert compare_dir(sample_runs["bm25"].parent).runs == ["bm25", "dense"]
    assert (
        compare([sample_runs["bm25"], sample_runs["dense"]], baseline="dense").baseline == "dense"
    )


def _hand_run(tmp_path, name: str, rel_rank: dict[str, int]):
    """A run dir where query q's relevant doc sits at rank rel_rank[q] among 10 results."""
    rows = []
    for q, r in rel_rank.items():
        docs = [f"{q}-filler{i}" for i in range(9)]
        docs.insert(r - 1, f"{q}-rel")
        rows += [(q, i + 1, d, d, 1.0 / (i + 1)) for i, d in enumerate(docs)]
    recall = pl.DataFrame(
        rows,
        schema={
            "query_id": pl.String,
            "rank": pl.Int32,
            "node_id": pl.String,
            "doc_id": pl.String,
            "score": pl.Float64,
        },
        orient="row",
    )
    d = tmp_path / name
    d.mkdir()
    recall.write_parquet(d / "recall.parquet")
    (d / "manifest.json").write_text(
        json.dumps({"config": {"data": {"name": "hand"}}, "timings_s": {}})
    )
    return d


def test_compare_marks_clear_improvement_significant(tmp_path):
    from scipy.stats import ttest_rel

    qids = [f"q{i:02d}" for i in range(20)]
    qrels = pl.DataFrame(
        {"query_id": qids, "node_id": [f"{q}-rel" for q in qids], "relevance": [1] * 20}
    )
    queries = pl.DataFrame({"query_id": qids, "group": ["a"] * 10 + ["b"] * 10})
    bad_ranks = {q: (5 if i % 2 else 3) for i, q in enumerate(qids)}
    bad = _hand_run(tmp_path, "bad", bad_ranks)
    good = _hand_run(tmp_path, "good", {q: 1 for q in qids})
    same = _hand_run(tmp_path, "same", bad_ranks)
    res = compare(
        [bad, good, same], metrics=["mrr", "recall@1", "recall@10"], qrels=qrels, queries=queries
    )
    mrr = {r: v for r, v in res.table.select("run", "mrr").iter_rows()}
    assert mrr == {
        "bad": pytest.approx((1 / 5 + 1 / 3) / 2),
        "good": 1.0,
        "same": pytest.approx((1 / 5 + 1 / 3) / 2),
    }
    a = [1.0] * 20
    b = [1 / bad_ranks[q] for q in qids]
    assert res.table.filter(pl.col("run") == "good")["mrr_p"][0] == pytest.approx(
        ttest_rel(a, b).pvalue
    )
    assert res.table.filter(pl.col("run") == "same")["mrr_p"][0] == 1.0
    assert res.table.filter(pl.col("run") == "good")["recall@1_p"][0] == 0.0  # +1 on every query
    assert (
        res.table.filter(pl.col("run") == "good")["recall@10_p"][0] == 1.0
    )  # all runs find it in the top 10
    text = format_table(res)
    assert "| good | 20 | 1.0000*† | 1.0000*† | 1.0000† |" in text
    assert "| same | 20 | 0.2667 | 0.0000 | 1.0000† |" in text
    assert set(res.groups) == {"a", "b"} and res.groups["a"]["n_queries"].to_list() == [10, 10, 10]


def test_compare_ci_adds_each_means_bootstrap_half_width(tmp_path):
    from pipeline.report.bootstrap import bootstrap_ci

    qids = [f"q{i:02d}" for i in range(20)]
    qrels = pl.DataFrame(
        {"query_id": qids, "node_id": [f"{q}-rel" for q in qids], "relevance": [1] * 20}
    )
    queries = pl.DataFrame({"query_id": qids, "group": ["a"] * 10 + ["b"] * 10})
    ranks = {q: (5 if i % 2 else 3) for i, q in enumerate(qids)}  # mrr 1/3, 1/5, 1/3, ...
    bad = _hand_run(tmp_path, "bad", ranks)
    good = _hand_run(tmp_path, "good", {q: 1 for q in qids})
    res = compare([bad, good], metrics=["mrr"], qrels=qrels, queries=queries, ci=True)
    mrr = [1 / ranks[q] for q in qids]
    whole, group_a = bootstrap_ci(mrr), bootstrap_ci(mrr[:10])
    assert group_a != whole  # the group table resamples its own 10 queries
    text = format_table(res)
    half = max(whole.mean - whole.low, whole.high - whole.mean)
    assert f"| bad (baseline) | 20 | {whole.mean:.4f} ± {half:.4f} |" in text
    assert "| good | 20 | 1.0000 ± 0.0000*† |" in text  # 1.0 on every query: no spread
    half_a = max(group_a.mean - group_a.low, group_a.high - group_a.mean)
    assert f"| bad (baseline) | 10 | {group_a.mean:.4f} ± {half_a:.4f} |" in text
    assert "half-width of the 95% bootstrap interval" in text
    plain = format_table(compare([bad, good], metrics=["mrr"], qrels=qrels, queries=queries))
    assert "±" not in plain and "| good | 20 | 1.0000*† |" in plain


def test_recall_compare_ci_flag_prints_the_intervals(sample_runs, capsys):
    from pipeline.cli.main import main

    assert main(["compare", str(sample_runs["bm25"]), str(sample_runs["dense"]), "--ci"]) == 0
    with_ci = capsys.readouterr().out
    res = compare([sample_runs["bm25"], sample_runs["dense"]], ci=True)
    assert with_ci.strip() == format_table(res).strip() and " ± " in with_ci
    assert main(["compare", str(sample_runs["bm25"]), str(sample_runs["dense"])]) == 0
    assert " ± " not in capsys.readouterr().out


def test_compare_reads_per_query_parquet_without_recomputing(sample_runs, tmp_path, monkeypatch):
    import importlib
    import shutil

    compare_mod = importlib.import_module(
        "pipeline.report.compare"
    )  # the package exports a function of that name

    for name in ("bm25", "dense"):
        pq = pl.read_parquet(sample_runs[name] / "per_query.parquet")
        assert pq.columns == ["query_id", "group", *METRICS] and pq.height == 30
        expected = _metrics_json(sample_runs[name])
        assert all(pq[m].mean() == pytest.approx(expected[m], abs=1e-12) for m in METRICS)

    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(compare_mod, "_load_truth", boom)
    res = compare([sample_runs["bm25"], sample_runs["dense"]])
    stored = pl.read_parquet(sample_runs["dense"] / "per_query.parquet")
    got = res.per_query.filter(pl.col("run") == "dense").drop("run").sort("query_id")
    assert got.equals(stored.sort("query_id"))
    # a run without per_query.parquet (an older run) is recomputed from the qrels
    old = tmp_path / "old"
    shutil.copytree(sample_runs["dense"], old)
    (old / "per_query.parquet").unlink()
    with pytest.raises(AssertionError, match="recomputed"):
        compare([sample_runs["bm25"], old])
    monkeypatch.undo()
    again = compare([sample_runs["bm25"], old])
    assert (
        again.per_query.filter(pl.col("run") == "old")
        .drop("run")
        .sort("query_id")
        .equals(stored.sort("query_id"))
    )


def test_worst_queries_and_wins_losses_hand_made():
    from pipeline.report import wins_losses, worst_queries

    pq = pl.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 3,
            "query_id": ["q1", "q2", "q3"] * 2,
            "mrr": [1.0, 0.5, 0.25, 0.5, 0.5, 1.0],
            "recall@1": [1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        }
    )
    worst = worst_queries(pq.filter(pl.col("run") == "a"), "mrr", 2)
    assert worst["query_id"].to_list() == ["q3", "q2"]
    assert worst_queries(pq.filter(pl.col("run") == "b"), "mrr", 2)["query_id"].to_list() == [
        "q1",
        "q2",
    ]  # tie: by id
    wl = wins_losses(pq, "a", ["mrr", "recall@1"])
    assert wl.to_dicts() == [
        {"run": "b", "metric": "mrr", "wins": 1, "losses": 1, "ties": 1},
        {"run": "b", "metric": "recall@1", "wins": 1, "losses": 1, "ties": 1},
    ]


def test_compare_errors_name_the_run_dir(tmp_path, sample_runs):
    (tmp_path / "unfinished").mkdir()
    with pytest.raises(DataError, match="unfinished.*no manifest.json"):
        compare([sample_runs["bm25"], tmp_path / "unfinished"])
    with pytest.raises(ConfigError, match="baseline='nope'"):
        compare([sample_runs["bm25"]], baseline="nope")
    with pytest.raises(DataError, match="no subfolder holds a manifest.json"):
        compare_dir(tmp_path)


# --- plots and reports ------------------------------------------------------------------------


def test_plots_are_valid_deterministic_pngs(tmp_path):
    nov = pl.DataFrame(
        {
            "query_id": ["q1", "q2", "q3"],
            "novelty": [0.2, 0.5, 0.9],
            "residual_norm": [None, 0.4, 0.1],
            "novelty_gate": [False, True, True],
            "residual_gate": [False, True, False],
        }
    )
    a = plots.novelty(nov, tmp_path / "a.png", 0.4, 0.3)
    b = plots.novelty(nov, tmp_path / "b.png", 0.4, 0.3)
    assert a.read_bytes()[:8] == PNG_MAGIC and a.read_bytes() == b.read_bytes()
    lat = plots.stage_latency({"ingest": 0.5, "embed": 2.0}, tmp_path / "lat.png")
    curve = plots.recall_curve(
        {"x": {"recall@1": 0.2, "recall@10": 0.7, "mrr": 0.4}}, tmp_path / "r.png"
    )
    comps = plots.score_components(_recall().with_columns(dense=pl.lit(0.3)), tmp_path / "c.png")
    for p in (lat, curve, comps):
        assert p.read_bytes()[:8] == PNG_MAGIC and p.stat().st_size > 5000


def test_run_report_writes_md_html_and_pngs(sample_runs):
    run_dir = sample_runs["bm25"]
    md_path, html_path = run_report(run_dir)
    assert md_path == run_dir / "report.md" and html_path == run_dir / "report.html"
    md, page = md_path.read_text(), html_path.read_text()
    metrics = _metrics_json(run_dir)
    assert "| group | n | " + " | ".join(METRICS) + " |" in md
    assert f"| all | 30 | {metrics['recall@1']:.4f} | {metrics['recall@2']:.4f} |" in md
    assert f"| temporal | {metrics['by_group']['temporal']['n_queries']} |" in md
    pngs = [line.split("(")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]
    assert set(pngs) == {
        "report-recall.png",
        "report-groups.png",
        "report-scores.png",
        "report-latency.png",
    }
    for name in pngs:
        assert (run_dir / name).read_bytes()[:8] == PNG_MAGIC
    assert page.count("data:image/png;base64,") == 4 and 'src="report-' not in page
    assert f"<td>{metrics['ndcg@10']:.4f}</td>" in page
    pq = pl.read_parquet(run_dir / "per_query.parquet").sort("ndcg@10", "query_id")
    assert "## Worst 10 queries by ndcg@10" in md
    assert f"| {pq['query_id'][0]} | {pq['group'][0]} | {pq['recall@1'][0]:.4f} |" in md
    assert "judged items not in the corpus" not in md  # the sample's qrels are all in the corpus


def test_compare_report_writes_table_and_figures(sample_runs, tmp_path):
    res = compare([sample_runs["bm25"], sample_runs["dense"]])
    md_path, html_path = compare_report(res, tmp_path / "cmp")
    md = md_path.read_text()
    assert format_table(res) in md and "![Recall@k](compare-recall.png)" in md
    assert (tmp_path / "cmp" / "compare-groups.png").read_bytes()[:8] == PNG_MAGIC
    page = html_path.read_text()
    # overall + one per group + the wins/losses table
    assert (
        page.count("<table>") == 2 + len(res.groups) and page.count("data:image/png;base64,") == 2
    )
    assert not math.isnan(res.table["mrr"][1])
    a = res.per_query.filter(pl.col("run") == "bm25").sort("query_id")["mrr"]
    b = res.per_query.filter(pl.col("run") == "dense").sort("query_id")["mrr"]
    wins, losses = int(((b - a) > 1e-12).sum()), int(((a - b) > 1e-12).sum())
    assert "## Wins and losses per query against bm25" in md
    assert f"| dense | mrr | {wins} | {losses} | {30 - wins - losses} |" in md
