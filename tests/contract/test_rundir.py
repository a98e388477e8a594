"""A run directory holds only this run's outputs: a rerun into the same folder with fewer outputs
leaves no stale file, and manifest.outputs lists exactly the output files present."""

import json

import pytest

from pipeline.contract import rundir
from pipeline.run import runner

FULL = [
    "embed=hashing",
    "preset=best",
    "data.limit_queries=4",
    "novelty=bme",
    "inject.format=oks",
    "signals=default",
    "analyze.enabled=true",
    "analyze.topics=3",
    "report=true",
]
REPORT = {"report.md", "report.html"}


def _files(d):
    return {p.name for p in d.iterdir() if p.is_file()}


def test_rerun_with_fewer_outputs_leaves_no_stale_file(compose, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text(
        "not the pipeline's"
    )  # a foreign file is neither removed nor listed
    first = runner.run(compose(FULL), out)["manifest"]
    written = _files(out) - {"notes.txt", "manifest.json"}
    assert {
        "novelty.parquet",
        "injection.parquet",
        "signals.parquet",
        "topics.parquet",
        "node_topics.parquet",
        "recall_topics.parquet",
        "metrics.json",
        "per_query.parquet",
        "recall.parquet",
    } <= written
    assert all(rundir.is_output(n) for n in written), sorted(
        n for n in written if not rundir.is_output(n)
    )
    assert set(first["outputs"]) == {
        n for n in written if n not in REPORT and not n.startswith("report-")
    }

    second = runner.run(
        compose(["embed=hashing", "preset=best", "data.limit_queries=4", "report=false"]), out
    )["manifest"]
    assert _files(out) == {
        "notes.txt",
        "manifest.json",
        "recall.parquet",
        "metrics.json",
        "per_query.parquet",
    }
    assert second["outputs"] == ["metrics.json", "per_query.parquet", "recall.parquet"]
    assert json.loads((out / "manifest.json").read_text())["outputs"] == second["outputs"]


def test_clear_removes_known_outputs_and_keeps_inputs_and_foreign_files(tmp_path):
    names = [
        "manifest.json",
        "recall.parquet",
        "report-recall.png",
        "signals-r2.parquet",
        ".recall.parquet.x1.tmp",
        "signals-r1.parquet",
        "notes.txt",
        "cli.log",
    ]
    for n in names:
        (tmp_path / n).write_text("x")
    cfg = {
        "signals": {"path": str(tmp_path / "signals-r1.parquet")}
    }  # an input kept in the run folder
    assert rundir.clear(tmp_path, cfg) == [
        ".recall.parquet.x1.tmp",
        "recall.parquet",
        "report-recall.png",
        "signals-r2.parquet",
    ]
    assert _files(tmp_path) == {"signals-r1.parquet", "notes.txt", "cli.log"}
    assert rundir.outputs(tmp_path, cfg) == []
    assert rundir.outputs(tmp_path) == ["signals-r1.parquet"]


@pytest.mark.parametrize(
    "name,known",
    [
        ("novelty.parquet", True),
        ("report-x.png", True),
        ("recall.parquet.bak", False),
        ("cli.log", False),
        ("manifest.json", False),
    ],
)
def test_is_output(name, known):
    assert rundir.is_output(name) is known


def test_a_run_directory_written_before_the_config_groups_mirrored_the_stages_still_loads():
    """Issue 15 renamed and moved config groups; a manifest's config of the old layout is read in
    the new one, and a current config comes back unchanged."""
    old = {
        "fusion": {"method": "wsum"},
        "eval": {"metrics": ["recall@5"]},
        "scope": {"policy": "bme"},
        "query": {
            "blend": True,
            "anchors": True,
            "anchor_energy": 2.0,
            "anchor_min_len": 2,
            "cross_recall": False,
            "cross_mult": 1.5,
            "cooccur": {"enabled": True, "scale": 0.1},
        },
        "select": {"method": "dpp", "prob_recall": {"enabled": False, "p": 0.15}},
        "novelty": {"enabled": True, "seed_diffusion": False},
        "diffuse": {"method": "pedsa"},
    }
    new = rundir.upgrade_config(old)
    assert new == {
        "fuse": {"method": "wsum"},
        "evaluate": {"metrics": ["recall@5"]},
        "scope_policy": {"policy": "bme"},
        "query": {"blend": True},
        "anchors": {"enabled": True, "energy": 2.0, "min_len": 2},
        "cross_recall": {"enabled": False, "mult": 1.5},
        "cooccur": {"enabled": True, "scale": 0.1},
        "select": {"method": "dpp"},
        "prob_recall": {"enabled": False, "p": 0.15},
        "novelty": {"enabled": True},
        "diffuse": {"method": "pedsa", "residual_seeds": False},
    }
    assert rundir.upgrade_config(new) == new
    assert old["query"]["anchors"] is True  # the input is not changed


def test_a_run_directory_written_before_lexical_prf_gets_it_off():
    old = {"lexical": {"k1": 0.9, "b": 0.2}}
    assert rundir.upgrade_config(old) == {
        "lexical": {
            "k1": 0.9,
            "b": 0.2,
            "prf_docs": 0,
            "prf_terms": 10,
            "prf_weight": 0.5,
            "scorer": "scipy",
        }
    }
    assert old == {"lexical": {"k1": 0.9, "b": 0.2}}  # the input is not changed
