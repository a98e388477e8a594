"""`recall tune`: a seeded Optuna sweep writes a preset that reproduces its best trial; query halves."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import numpy as np
import polars as pl
import pytest
import yaml

from pipeline.contract.errors import ConfigError
from pipeline.contract.ingest import query_half
from pipeline.run.tune import preset_text
from tests.helpers.paths import REPO


def test_query_halves_partition_the_queries_stably():
    q = pl.DataFrame({"query_id": [f"q{i}" for i in range(200)], "text": ["x"] * 200})
    a, b = query_half(q, "a"), query_half(q, "b")
    assert a.height + b.height == 200 and set(a["query_id"]).isdisjoint(set(b["query_id"]))
    assert 70 < a.height < 130  # a hash split, roughly half
    assert (
        query_half(q.reverse(), "a")["query_id"].sort().to_list() == a["query_id"].sort().to_list()
    )


def test_preset_text_sets_dotted_keys_and_group_choices(compose):
    text = preset_text(
        "best",
        {
            "diffuse": "ppr",
            "fuse.weights.dense": 0.5,
            "graph.hubs.entities": True,
            "score.terms.graph": 12.3456789012,
        },
        "best_x",
        ["header line"],
    )
    assert text.startswith("# @package _global_\n# header line\n")
    doc = yaml.safe_load(text)
    assert doc["defaults"] == [
        "best",
        "_self_",
        {"override /diffuse": "ppr"},
    ]  # only what the search chose
    assert doc["fuse"] == {"weights": {"dense": 0.5}} and doc["score"] == {
        "terms": {"graph": 12.3457}
    }
    name = f"tunetext_{uuid.uuid4().hex[:8]}"
    path = REPO / "conf" / "preset" / f"{name}.yaml"
    try:
        path.write_text(text)
        cfg = compose([f"preset={name}"])
    finally:
        path.unlink()
    assert dict(cfg.fuse.weights) == {
        "dense": 0.5,
        "lexical": 0.4,
    }  # lexical from conf/preset/best.yaml
    assert (
        cfg.graph.hubs.entities is True
        and cfg.preset_name == "best_x"
        and cfg.diffuse.method == "ppr"
    )
    assert cfg.score.terms.graph == 12.3457 and cfg.diffuse.seed_k == 30  # seed_k from best


def _tune(name: str, out) -> tuple[str, dict]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli.main",
            "tune",
            "data=sample",
            "preset=best",
            "embed=hashing",
            "tune.trials=3",
            "tune.seed=5",
            f"tune.name={name}",
            f"out_dir={out}",
            f"cache_dir={out}/cache",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, yaml.safe_load((out / "optimization_results.yaml").read_text())


def test_tune_writes_a_preset_that_reproduces_its_best_trial(tmp_path):
    name = f"tunetest_{uuid.uuid4().hex[:8]}"
    path = REPO / "conf" / "preset" / f"{name}.yaml"
    second = path.with_name(f"{name}_2.yaml")
    try:
        out, res = _tune(name, tmp_path / "t1")
        best = float(res["best_value"])
        lines = out.strip().splitlines()
        # progress: one line per trial (its own score, the best so far), then per final run
        values = [
            float(json.loads((d / "metrics.json").read_text())["recall@5"])
            for d in sorted((tmp_path / "t1").glob("[0-9]-*"))
        ]
        assert len(values) == 3 and max(values) == best
        assert lines[:3] == [
            f"trial {i + 1}/3: recall@5 {v:.4f} on half a (best {max(values[: i + 1]):.4f})"
            for i, v in enumerate(values)
        ]
        assert [x.split(":")[0] for x in lines[3:8]] == [f"final run {i}/5" for i in range(1, 6)]
        lines = lines[8:]
        assert lines[0] == f"best recall@5 on half a: {best:.4f} (trials in {tmp_path / 't1'})"
        assert lines[1].startswith(
            f"rerun: half a {best:.4f}, held-out half b "
        )  # the preset reproduces the trial
        assert lines[2].startswith("base preset best: half a ")
        text = path.read_text()
        assert "3 TPE trials, seed 5" in text and f"recall@5 = {best:.4f} on half a" in text
        assert "# base preset 'best': half a " in text
        doc = yaml.safe_load(text)
        for key, value in res["best_params"].items():
            if "." in key:
                node = doc
                for part in key.split("."):
                    node = node[part]
                assert node == pytest.approx(value, rel=1e-5)  # written rounded (tune.rounded)
        # same seed, same trials; the existing preset is not overwritten: the rerun writes <name>_2
        out2, res2 = _tune(name, tmp_path / "t2")
        assert res2["best_params"] == res["best_params"] and res2["best_value"] == res["best_value"]
        assert path.read_text() == text
        assert out2.splitlines()[0] == (
            f"conf/preset/{name}.yaml exists (tune never overwrites a preset): writing {name}_2"
        )
        assert yaml.safe_load(second.read_text())["preset_name"] == f"{name}_2"
    finally:
        path.unlink(missing_ok=True)
        second.unlink(missing_ok=True)


def test_tune_never_overwrites_a_shipped_preset():
    """The default name of ``preset=best data=musique`` is the shipped best_musique: tune writes
    best_musique_2 instead."""
    from pipeline.run.tune import free_name

    assert (REPO / "conf" / "preset" / "best_musique.yaml").is_file()
    assert free_name("best_musique") == "best_musique_2"
    assert free_name("best_nowhere") == "best_nowhere"


def test_a_non_integer_trial_count_is_one_line_naming_the_option():
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", "tune", "data=sample", "tune.trials=oops"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "tune.trials='oops' is not an integer; give e.g. tune.trials=40" in proc.stderr


def test_sample_space_draws_inside_each_expression_and_is_seeded():
    from pipeline.run.tune import sample_space

    space = {
        "a": "interval(0.5, 1.8)",
        "n": "range(3, 6)",
        "g": "tag(log, interval(1.0, 1000.0))",
    }
    points = sample_space(space, 400, seed=13)
    assert points == sample_space(space, 400, seed=13) and points != sample_space(space, 400, 14)
    a = np.array([p["a"] for p in points])
    n = [p["n"] for p in points]
    g = np.log10([p["g"] for p in points])
    assert a.min() >= 0.5 and a.max() < 1.8 and all(isinstance(x, int) for x in n)
    assert set(n) == {3, 4, 5}  # Hydra's range(3, 6): 6 excluded
    # log-uniform over 1..1000: each decade holds about a third of the draws (uniform would put
    # ~90% in the last decade)
    assert 0.2 < np.mean(g < 1) < 0.45 and 0.2 < np.mean(g > 2) < 0.45 and g.max() < 3


def test_sample_space_names_the_key_it_cannot_sample():
    from pipeline.run.tune import sample_space

    with pytest.raises(ConfigError, match=r"k: 'choice\(1, 2\)' cannot be sampled"):
        sample_space({"k": "choice(1, 2)"}, 1, seed=0)
    for bad in ("interval(1, 2))", "tag(log, range(1, 9))", "tag(exp, interval(1, 2))"):
        with pytest.raises(ConfigError, match="cannot be sampled"):
            sample_space({"k": bad}, 1, seed=0)
