"""One importance scale, 0–10 (the data contract), from the adapters to feedback and the scores.

A 0–1 input (OKS front matter) is converted once at ingest: ``data.importance_scale`` auto (every
value ≤ 1 → ×10), 10 or 1. Hand-computed values on each path that reads importance.
"""

import datetime as dt
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.adapters import parquet, workspace
from pipeline.contract.errors import ConfigError, DataError
from pipeline.contract.schema import importance_to_10
from pipeline.run import feedback
from pipeline.stages import score, signals
from pipeline.stages.probrecall import append

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)


def _imp(values):
    return pl.DataFrame(
        {"node_id": [f"n{i}" for i in range(len(values))], "importance": values},
        schema_overrides={"importance": pl.Float32},
    )


def test_scale_rule():
    out, note = importance_to_10(_imp([0.95, None, 0.2, 1.0]), "auto", "n.parquet")
    assert (
        out["importance"].to_list() == pytest.approx([9.5, None, 2.0, 10.0]) and "0–1 scale" in note
    )
    out, note = importance_to_10(_imp([0.5, 5.0]), "auto", "n.parquet")  # no doc_id: per node
    assert out["importance"].to_list() == [5.0, 5.0] and "every value of its document" in note
    docs = _imp([0.5, 5.0, 0.3, 0.7]).with_columns(doc_id=pl.Series(["d1", "d1", "d2", None]))
    out, note = importance_to_10(docs, "auto", "n.parquet")
    # d1 holds a value > 1: its 0.5 is already 0–10; d2 and the node without a document are 0–1
    assert out["importance"].to_list() == pytest.approx([0.5, 5.0, 3.0, 7.0])
    out, note = importance_to_10(_imp([3.0, 5.0]), "auto", "n.parquet")
    assert out["importance"].to_list() == [3.0, 5.0] and note is None  # nothing converted
    out, note = importance_to_10(_imp([0.3]), 1, "n.parquet")  # an int from YAML
    assert out["importance"].to_list() == pytest.approx([3.0]) and "data.importance_scale=1" in note
    out, note = importance_to_10(_imp([0.3]), "10", "n.parquet")  # told it is 0–10: kept
    assert out["importance"].to_list() == pytest.approx([0.3]) and note is None
    assert importance_to_10(_imp([None, None]), "auto", "n")[1] is None
    assert importance_to_10(pl.DataFrame({"node_id": ["a"]}), "auto", "n")[1] is None


def test_scale_errors_name_the_row_and_the_fix():
    with pytest.raises(
        DataError, match=r"n.parquet, row 1, field 'importance': importance 11.0 is outside 0–10"
    ):
        importance_to_10(_imp([3.0, 11.0]), "auto", "n.parquet")
    with pytest.raises(
        DataError,
        match=r"row 0, field 'importance': importance 1.5 is outside 0–1 .*"
        r"importance_scale=1",
    ):
        importance_to_10(_imp([1.5]), "1", "n.parquet")
    with pytest.raises(DataError, match=r"importance -1.0 is outside"):
        importance_to_10(_imp([-1.0]), "auto", "n.parquet")
    with pytest.raises(ConfigError, match=r"data.importance_scale='percent' is not valid"):
        importance_to_10(_imp([0.5]), "percent", "n.parquet")


def _workspace(tmp_path, importance="0.95"):
    (tmp_path / "a.md").write_text(
        f"---\ntype: concept\nimportance: {importance}\nstatus: active\n---\n# A\nalpha\n"
    )
    (tmp_path / "b.md").write_text("---\nimportance: 0.4\n---\n# B\nbeta\n")
    return tmp_path


def test_issue_example_095_is_96_after_one_feedback_access(tmp_path):
    ds = workspace.load(str(_workspace(tmp_path)))
    nodes = ds.nodes.sort("node_id")
    assert nodes["importance"].to_list() == pytest.approx([9.5, 4.0]) and "importance" in ds.notes
    table = nodes.select("node_id")
    acc = pl.DataFrame({"node_id": ["a.md#a"], "n": [1]}, schema_overrides={"n": pl.Int64})
    out = feedback.apply(table, acc, NOW, nodes)
    assert out["importance"].to_list() == pytest.approx(
        [9.6, 4.0]
    )  # 9.5 + 0.1; not 0.95 + 0.1 read as 0.105
    # the memory curve reads the same scale: (0.96 · e^0 (concept) + 0.5 · ln(1 + 1 access)) × 1.2 (active)
    mem = signals.memory_score(signals.overlay(nodes, out), NOW)
    assert mem[0] == pytest.approx((0.96 + 0.5 * math.log(2)) * 1.2, abs=1e-6)  # 1.5679


def test_auto_decides_per_note_and_scale_10_keeps_everything(tmp_path):
    """auto reads each note on its own: a.md (7) is 0–10, b.md (0.4) 0–1 whatever a.md holds (an
    edit of one note never rescales another); data.importance_scale=10 keeps every value."""
    ds = workspace.load(str(_workspace(tmp_path, importance="7")))
    assert ds.nodes.sort("node_id")["importance"].to_list() == pytest.approx([7.0, 4.0])
    ds = workspace.load(str(tmp_path), importance_scale="10")
    assert (
        ds.nodes.sort("node_id")["importance"].to_list() == pytest.approx([7.0, 0.4])
        and ds.notes == {}
    )


def test_parquet_adapter_converts_and_the_score_term_reads_0_10(tmp_path):
    pl.DataFrame(
        {"node_id": ["a", "b"], "text": ["x", "y"], "importance": [0.95, 0.2]}
    ).write_parquet(tmp_path / "nodes.parquet")
    ds = parquet.load(str(tmp_path))
    assert ds.nodes["importance"].to_list() == pytest.approx([9.5, 2.0])
    assert "multiplied by 10" in ds.notes["importance"]
    cand = pl.DataFrame({"query_idx": [0, 0], "node_idx": [0, 1]})
    df = score.attach(cand, ds.nodes, pl.DataFrame({"query_id": ["q"]}), None, ["importance"], NOW)
    out = score.compute(df, {"importance": 1.0}, [], normalize=False).sort("node_idx")
    assert out["importance"].to_list() == pytest.approx([0.95, 0.2])  # BME: clip(importance / 10)


def test_probabilistic_recall_pool_uses_the_converted_scale(tmp_path):
    ds = workspace.load(str(_workspace(tmp_path)))
    nodes = ds.nodes.sort("node_id")  # a: 0.95 → 9.5 (≥ 6, in the pool); b: 0.4 → 4 (not)
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(30)], "text": ["x"] * 30})
    sel = pl.DataFrame(
        {"query_idx": list(range(30)), "node_idx": [1] * 30, "rank": [1] * 30, "score": [1.0] * 30},
        schema_overrides={"rank": pl.Int32},
    )
    extra = append(sel, nodes, queries, k=5, p=0.5, seed=3, min_importance=6.0).filter(
        pl.col("probabilistic")
    )
    assert set(extra["node_idx"]) == {0}
    assert np.unique(extra["query_idx"]).size == extra.height  # once per query at most


def test_run_manifest_carries_the_note(compose, tmp_path):
    from pipeline.run import runner

    (tmp_path / "ws").mkdir()
    notes = _workspace(tmp_path / "ws")
    (tmp_path / "q.jsonl").write_text('{"query_id": "q1", "text": "alpha"}\n')
    cfg = compose(
        [
            "preset=bm25",
            "data=workspace",
            f"data.path={notes}",
            f"data.queries={tmp_path / 'q.jsonl'}",
            "report=false",
        ]
    )
    man = runner.run(cfg, tmp_path / "run")["manifest"]
    assert "multiplied by 10" in man["data_notes"]["importance"]
    cfg = compose(
        [
            "preset=bm25",
            "data=workspace",
            f"data.path={notes}",
            f"data.queries={tmp_path / 'q.jsonl'}",
            "report=false",
            "data.importance_scale=10",
        ]
    )
    assert runner.run(cfg, tmp_path / "run10")["manifest"]["data_notes"] == {}


WORDS = ["alpha", "beta", "gamma", "delta", "echo", "foxtrot"]


def _scoped_workspace(root, b_importance: list[str]):
    """Scope a/ with three 0–1 notes, scope b/ with one note per ``b_importance`` value."""
    root.mkdir()
    for scope, values in (("a", ["0.9", "0.2", "0.5"]), ("b", b_importance)):
        (root / scope).mkdir()
        for i, v in enumerate(values):
            words = f"{WORDS[i % 6]} {WORDS[(i + 1) % 6]} note {scope}{i}"
            (root / scope / f"n{i}.md").write_text(f"---\nimportance: {v}\n---\n# N{i}\n{words}\n")
    return root


@settings(max_examples=3, deadline=None, derandomize=True)
@given(b=st.lists(st.sampled_from(["0.1", "0.8", "1", "3", "9.5"]), min_size=1, max_size=3))
def test_editing_one_scope_leaves_another_scopes_recall_byte_identical(tmp_path_factory, b):
    """preset=bme over a workspace (importance is a score term): a query scoped to a/ gets
    byte-identical rows whatever scope b/'s importance values are (before: a value > 1 in b/
    turned a/'s 0–1 values into 0–10 ones)."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    from tests.helpers.isolated import fresh_run
    from tests.helpers.paths import REPO, SHARED_DATA

    tmp = tmp_path_factory.mktemp("sealed-importance")
    q = tmp / "q.jsonl"
    q.write_text(
        '{"query_id": "qa", "text": "alpha beta note", "doc_scope": ["a"]}\n'
        '{"query_id": "qa2", "text": "gamma delta", "doc_scope": ["a"]}\n'
    )
    rows = []
    for name, values in (("before", ["0.3"]), ("after", b)):
        ws = _scoped_workspace(tmp / f"ws-{name}", values)
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = hcompose(
                "config",
                overrides=[
                    "device=cpu",
                    f"data_dir={SHARED_DATA}",
                    "data=workspace",
                    f"data.path={ws}",
                    f"data.queries={q}",
                    "preset=bme",
                    "embed=hashing",
                    "report=false",
                ],
            )
        rows.append(fresh_run(cfg, tmp, name).recall())
    assert rows[0].height > 0 and set(rows[0]["node_id"]) <= {f"a/n{i}.md#n{i}" for i in range(3)}
    assert rows[0].equals(rows[1])
