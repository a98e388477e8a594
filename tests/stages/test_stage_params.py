"""Every stage takes its parameters one way (issue 54, item 3): ``Stage.params(run_state)`` builds
one frozen ``Params`` dataclass of the stage's own, once per run, from the stage's config node and
what it needs from the run (k, the enabled channels, seed, include_archived, device…); the stage's
``run(ctx, params)`` reads nothing else from the config. Checked as properties: over the presets,
for every stage of ``querypath.STAGES``; and over the source of ``pipeline/stages/``, by an AST
walk that a planted case shows finds what it is meant to find."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import polars as pl
import pytest

from pipeline.contract.errors import ConfigError
from pipeline.contract.registry import call_target
from pipeline.core.context import RunContext, RunState
from pipeline.core.stage import Params
from pipeline.run import querypath
from pipeline.stages.embed import EmbedParams

STAGES_DIR = Path(querypath.__file__).resolve().parents[1] / "stages"
PRESETS = ["dense", "bm25", "best", "bme", "reme", "oks", "hipporag"]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_stage_builds_one_frozen_params_dataclass(compose, preset):
    cfg = compose(["data=sample", f"preset={preset}", "embed=hashing"])
    state = RunState(cfg, call_target(cfg.data), "cpu", None)
    for stage in querypath.STAGES:
        p = stage.params(state)
        assert isinstance(p, Params) and dataclasses.is_dataclass(p), stage.name
        assert type(p).__dataclass_params__.frozen, f"{stage.name}: {type(p).__name__} not frozen"
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(p, dataclasses.fields(p)[0].name, None)
        assert stage.params(state) == p  # a function of the run: built alike every time


def test_the_run_values_reach_the_params(compose):
    cfg = compose(
        ["data=sample", "preset=bme", "embed=hashing", "k=7", "seed=5", "prob_recall.enabled=true"]
    )
    state = RunState(cfg, call_target(cfg.data), "cpu", None)
    by = {s.name: s.params(state) for s in querypath.STAGES}
    assert by["select"].k == 7 and by["oks_backend"].k == 7 and by["select"].seed == 5
    assert by["channels"].settings.seed == 5
    assert by["channels"].settings.enabled == tuple(cfg.channels) == by["fuse"].channels
    assert by["select"].prob_recall is not None and by["select"].prob_recall.p == 0.15
    assert by["score"].normalize is True and by["score"].factors == ["bme_time_decay"]


def config_reads(source: str) -> list[tuple[int, str]]:
    """(line, function) of each config read in a function that gets a query group's context (a
    parameter named ``ctx``) or the run state (``state``, the run-wide embed stage): any ``.cfg``
    attribute there (``ctx.cfg``, ``ctx.run.cfg``, ``state.cfg``, or through a name bound to
    ``ctx.run``); also ``ctx.cfg`` anywhere else in the module."""
    tree = ast.parse(source)
    found: dict[int, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs
            if any(a.arg in ("ctx", "state") for a in args):
                name = getattr(fn, "name", "<lambda>")
                for node in ast.walk(fn):
                    if isinstance(node, ast.Attribute) and node.attr == "cfg":
                        found[node.lineno] = name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "cfg"
            and isinstance(node.value, ast.Name)
            and node.value.id == "ctx"
        ):
            found.setdefault(node.lineno, "<module>")
    return sorted(found.items())


def test_the_check_finds_planted_config_reads():
    planted = (
        "def run_stage(ctx, p):\n"
        "    k = int(ctx.cfg.k)\n"
        "    state = ctx.run\n"
        "    return state.cfg.seed\n"
        "f = lambda ctx: ctx.run.cfg.channels\n"
        "g = ctx.cfg\n"
    )
    assert config_reads(planted) == [
        (2, "run_stage"),
        (4, "run_stage"),
        (5, "<lambda>"),
        (6, "<module>"),
    ]
    clean = (
        "def run_stage(ctx, p):\n"
        "    return p.k\n"
        "STAGE = Stage('x', run_stage, params=lambda run: P.from_cfg(run.cfg.x))\n"
    )
    assert config_reads(clean) == []


def test_no_stage_reads_the_config_from_its_context():
    files = sorted(STAGES_DIR.glob("*.py"))
    assert len(files) > 10
    reads = {f.name: config_reads(f.read_text()) for f in files}
    assert {name: r for name, r in reads.items() if r} == {}


def test_the_embed_stage_takes_its_params_from_the_run(compose):
    cfg = compose(
        [
            "data=sample",
            "preset=bme",
            "embed=hashing",
            "query.blend=true",
            "query.intent_split=false",
            "query.max_segments=3",
            "dense.index=blocked",
            "cache_dir=/tmp/x",
        ]
    )
    p = EmbedParams.of_run(cfg)
    assert type(p).__dataclass_params__.frozen and EmbedParams.of_run(cfg) == p
    assert (p.blend, p.intent_split, p.max_segments, p.blocked) == (True, False, 3, True)
    assert p.weights == (0.7, 0.2, 0.1) and p.cache_dir == "/tmp/x" and p.dense
    assert p.encoder["_target_"] == "hashing_embedder" and p.include_title is True
    queries = pl.DataFrame({"text": ["now", "q"], "context": [["u0", "a1"], None]})
    plan = p.plan(queries)  # the blend: the assistant's last turn and the user's before it
    assert plan.select("query_idx", "text", "weight").rows() == [
        (0, "now", 0.7),
        (0, "a1", 0.2),
        (0, "u0", 0.1),
        (1, "q", 1.0),
    ]
    off = EmbedParams.of_run(compose(["data=sample", "preset=bm25", "embed=hashing"]))
    assert not off.dense  # no dense channel: nothing is embedded


def test_a_context_has_no_config_to_read():
    assert not hasattr(RunContext, "cfg")


@pytest.mark.parametrize(
    "k, line",
    [
        ("abc", "k='abc' is not a whole number; give k=<an integer>"),
        ("true", "k=True is not a whole number; give k=<an integer>"),
        ("2.5", "k=2.5 is not a whole number; give k=<an integer>"),
        ("0", "k=0 is below 1; give k=<an integer ≥ 1>"),
    ],
)
def test_a_bad_k_is_one_error_line(k, line, compose, tmp_path, capsys):
    """``recall run k=abc`` ended in a ValueError traceback from ``int(cfg.k)``; the stages that
    take the run's k (select, oks_backend) now refuse it in one line."""
    from pipeline.cli.main import main

    cfg = compose(["data=sample", "preset=oks", "embed=hashing", f"k={k}"])
    state = RunState(cfg, call_target(cfg.data), "cpu", None)
    for stage in querypath.STAGES:
        if stage.name in ("select", "oks_backend"):
            with pytest.raises(ConfigError) as got:
                stage.params(state)
            assert str(got.value) == line
    out = tmp_path / "run"
    try:  # the Hydra job of `recall run` ends the process with the status
        status = main(["run", "data=sample", "embed=hashing", f"k={k}", f"out_dir={out}"])
    except SystemExit as done:
        status = done.code
    assert status == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {line}"


def test_the_oks_presets_k_is_an_integer(compose):
    for fmt, k in (("oks", 10), ("none", 5)):
        cfg = compose(["data=sample", "preset=oks", "embed=hashing", f"inject.format={fmt}"])
        state = RunState(cfg, call_target(cfg.data), "cpu", None)
        assert {s.name: s.params(state) for s in querypath.STAGES}["select"].k == k
