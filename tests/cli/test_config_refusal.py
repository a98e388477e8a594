"""Hydra keys that make Hydra import or call something are refused in every command (issue 26, 5).

Each trick below is a ``hydra`` setting from a user file that, before this check, made Hydra create
its ``marker`` file: ``builtins.open(marker, "w")`` as a callback, nested in a sweeper or launcher
(Hydra instantiates those recursively) or as a logging ``()`` factory; a logging handler class or
Hydra's FileHandler on the marker path; a job name that moves the job log out of the run
directory; an ``ext://`` value or a ``hydra.searchpath`` package whose import writes the marker.
Through ``recall run``, ``--multirun``, ``recall precompute`` and ``recall tune`` (the file comes in
with ``--config-dir``), and ``analyze`` / ``compare`` / ``feedback`` / ``report`` (the same node in
a run directory's manifest), each must end in exit 2, exactly one ``error:`` line naming the key,
no traceback, and no marker. The project's own Hydra settings (Optuna sweeper and samplers, Hydra's
logging options) pass the same check.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import polars as pl
import pytest
import yaml
from omegaconf import OmegaConf

from pipeline.cli.main import main
from pipeline.contract.errors import ConfigError


def _open(marker) -> dict:
    return {"_target_": "builtins.open", "_args_": [str(marker), "w"]}


def _factory(marker) -> dict:
    return {"()": "builtins.open", "file": str(marker), "mode": "w"}


BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"


def _tricks(t, pkg: str) -> dict[str, tuple[dict, str, list]]:
    """name → (hydra node, the key the error names (below ``hydra``), markers). ``pkg`` is a
    package on ``sys.path`` whose import creates ``t / "marker"``."""
    m = t / "marker"
    log = lambda where, node: {where: {"handlers": {"x": node}}}  # noqa: E731
    return {
        "callbacks": ({"callbacks": {"x": _open(m)}}, "callbacks.x=", [m]),
        "sweeper": (
            {"sweeper": {"_target_": BASIC_SWEEPER, "params": None, "x": _open(m)}},
            "sweeper.x._target_=",
            [m],
        ),
        "launcher": (
            {"launcher": {"_target_": BASIC_LAUNCHER, "x": _open(m)}},
            "launcher.x._target_=",
            [m],
        ),
        "job_logging handler ()": (
            log("job_logging", _factory(m)),
            "job_logging.handlers.x.()=",
            [m],
        ),
        "job_logging handler class": (
            log(
                "job_logging", {"class": "logging.handlers.WatchedFileHandler", "filename": str(m)}
            ),
            "job_logging.handlers.x.class=",
            [m],
        ),
        "job_logging FileHandler file": (
            log("job_logging", {"class": "logging.FileHandler", "filename": str(m)}),
            "job_logging.handlers.x.filename=",
            [m],
        ),
        "job_logging formatter ()": (
            {"job_logging": {"formatters": {"x": _factory(m)}}},
            "job_logging.formatters.x.()=",
            [m],
        ),
        "job_logging filter ()": (
            {"job_logging": {"filters": {"x": _factory(m)}}},
            "job_logging.filters.x.()=",
            [m],
        ),
        "job_logging ext://": (
            log("job_logging", {"class": "logging.StreamHandler", "stream": f"ext://{pkg}.s"}),
            "job_logging.handlers.x.stream=",
            [m],
        ),
        "hydra_logging FileHandler file": (
            log("hydra_logging", {"class": "logging.FileHandler", "filename": str(m)}),
            "hydra_logging.handlers.x.filename=",
            [m],
        ),
        "hydra_logging handler ()": (
            log("hydra_logging", _factory(m)),
            "hydra_logging.handlers.x.()=",
            [m],
        ),
        "searchpath": ({"searchpath": [f"pkg://{pkg}"]}, "searchpath=", [m]),
        "env_set": ({"job": {"env_set": {"PYTHONPATH": str(t)}}}, "job.env_set.PYTHONPATH=", []),
        "job name": (  # the job log: <run dir>/../esc.log (a run), <sweep>/esc.log (a sweep job)
            {"job": {"name": "../esc"}},
            "job.name=",
            [t / "esc.log", t / "out" / "esc.log"],
        ),
    }


NAMES = list(_tricks(Path("t"), "p"))
GROUP_FILES = {
    "sweeper",
    "launcher",
}  # structured Hydra nodes: replaced by a group file, not merged


@pytest.fixture
def trick_pkg(tmp_path, monkeypatch):
    """A package on sys.path (and PYTHONPATH, for child processes) whose import creates the marker."""
    name = f"recall_marker_{uuid.uuid4().hex[:10]}"
    pkg = tmp_path / "pkgs" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        f"open({str(tmp_path / 'marker')!r}, 'w').close()\ns = None\n\ndef fn(*a, **k):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pkgs"))
    return name


def _user_dir(t, name: str, pkg: str) -> tuple[list[str], str, list]:
    """``--config-dir <t/user> --config-name evil``: the package config with the trick's ``hydra``
    node (or, for a sweeper/launcher, its group file chosen in the defaults)."""
    node, key, markers = _tricks(t, pkg)[name]
    d = t / "user"
    d.mkdir(exist_ok=True)
    defaults: list = ["config", "_self_"]
    doc: dict = {}
    if name in GROUP_FILES:
        (group,) = node
        (d / "hydra" / group).mkdir(parents=True)
        (d / "hydra" / group / "evil.yaml").write_text(yaml.safe_dump(node[group]))
        defaults.insert(1, {f"override hydra/{group}": "evil"})
    else:
        doc["hydra"] = node
    (d / "evil.yaml").write_text(yaml.safe_dump({"defaults": defaults, **doc}))
    return ["--config-dir", str(d), "--config-name", "evil"], key, markers


def _common(t) -> list[str]:
    return [
        "device=cpu",
        "embed=hashing",
        "report=false",
        f"out_dir={t / 'out'}",
        f"cache_dir={t / 'cache'}",
    ]


def _refused(code, capsys, key: str, markers) -> None:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 2, err[-3000:]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}"), lines
    for m in markers:
        assert not m.exists(), m


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


ONE_PER_KEY = [  # each Hydra key once (its variants: through recall run and the run directories)
    "callbacks",
    "sweeper",
    "launcher",
    "job_logging handler ()",
    "hydra_logging FileHandler file",
    "searchpath",
    "env_set",
    "job name",
]
MODES = [("run", n) for n in NAMES] + [
    (mode, n) for mode in ("multirun", "precompute") for n in ONE_PER_KEY
]


@pytest.mark.parametrize(("mode", "name"), MODES)
def test_user_config_hydra_keys_are_refused(tmp_path, capsys, trick_pkg, mode, name):
    args, key, markers = _user_dir(tmp_path, name, trick_pkg)
    cmd = ["precompute"] if mode == "precompute" else ["run"]
    flag, sweep = (["--multirun"], ["preset=best,bm25"]) if mode == "multirun" else ([], [])
    code = _exit_code([*cmd, *flag, *args, *sweep, *_common(tmp_path)])
    where = f"{tmp_path / 'user'}/evil.yaml: hydra." if name == "searchpath" else "hydra."
    _refused(code, capsys, where + key, markers)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_searchpath_on_the_command_line_is_refused(tmp_path, capsys, trick_pkg):
    code = _exit_code(["run", f"hydra.searchpath=[pkg://{trick_pkg}]", *_common(tmp_path)])
    _refused(code, capsys, "hydra.searchpath=", [tmp_path / "marker"])


def test_a_sweep_job_whose_option_sets_a_hydra_key_is_refused_before_it_runs(tmp_path, capsys):
    """The sweep's own config passes; job 0 picks a user group option (``# @package _global_``)
    that adds a logging factory: its config is refused before Hydra configures its logging."""
    d = tmp_path / "user" / "extra"
    d.mkdir(parents=True)
    node = {"job_logging": {"handlers": {"x": _factory(tmp_path / "marker")}}}
    (d / "evil.yaml").write_text("# @package _global_\n" + yaml.safe_dump({"hydra": node}))
    (d / "plain.yaml").write_text("{}\n")
    code = _exit_code(
        [
            "run",
            "--multirun",
            "--config-dir",
            str(tmp_path / "user"),
            "+extra=evil,plain",
            *_common(tmp_path),
        ]
    )
    _refused(code, capsys, "hydra.job_logging.handlers.x.()=", [tmp_path / "marker"])
    assert not list((tmp_path / "out").glob("*/manifest.json"))


OPTUNA_TRICKS = ["callbacks", "optuna sampler", "custom_search_space"]


@pytest.mark.parametrize("name", OPTUNA_TRICKS)
def test_tune_refuses_them_and_its_own_sweeper_passes(tmp_path, capsys, trick_pkg, name):
    """``recall tune`` runs ``recall run --multirun hydra/sweeper=optuna`` in a child process; the
    user file reaches it through ``--config-dir``; its one-line refusal is tune's."""
    m = tmp_path / "marker"
    d = tmp_path / "user"
    d.mkdir()
    doc: dict = {"defaults": ["config", "_self_"]}
    if name == "optuna sampler":  # a structured node: replaced by a group file
        (d / "hydra" / "sweeper" / "sampler").mkdir(parents=True)
        sampler = {"_target_": "optuna.samplers.TPESampler", "seed": None, "x": _open(m)}
        (d / "hydra" / "sweeper" / "sampler" / "evil.yaml").write_text(yaml.safe_dump(sampler))
        doc["defaults"].insert(1, {"override hydra/sweeper/sampler": "evil"})
        key = "hydra.sweeper.sampler.x._target_='builtins.open'"
    elif name == "custom_search_space":
        doc["hydra"] = {"sweeper": {"custom_search_space": f"{trick_pkg}.fn"}}
        key = f"hydra.sweeper.custom_search_space='{trick_pkg}.fn'"
    else:
        node, suffix, _ = _tricks(tmp_path, trick_pkg)[name]
        doc["hydra"], key = node, "hydra." + suffix
    (d / "evil.yaml").write_text(yaml.safe_dump(doc))
    code = _exit_code(
        [
            "tune",
            "--config-dir",
            str(d),
            "--config-name",
            "evil",
            "data=sample",
            "tune.trials=1",
            f"tune.name=refused_{uuid.uuid4().hex[:8]}",
            *_common(tmp_path),
        ]
    )
    _refused(code, capsys, key, [m])


def _run_dir(t, hydra: dict):
    """A finished-run folder whose manifest config carries ``hydra`` (a run writes none), with the
    same node in ``.hydra/hydra.yaml`` (which no command reads)."""
    run = t / "run"
    (run / ".hydra").mkdir(parents=True)
    cfg = {"device": "cpu", "data": {"_target_": "sample"}, "signals": {"path": None}}
    (run / "manifest.json").write_text(json.dumps({"config": {**cfg, "hydra": hydra}}))
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    pl.DataFrame(
        {"query_id": ["q1"], "rank": [1], "node_id": ["n1"], "score": [1.0]}
    ).write_parquet(run / "recall.parquet")
    pl.DataFrame({"node_id": ["n1"]}).write_parquet(run / "signals.parquet")
    return run


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("command", ["analyze", "compare", "feedback", "report"])
def test_run_directory_hydra_keys_are_refused(tmp_path, capsys, trick_pkg, command, name):
    node, key, markers = _tricks(tmp_path, trick_pkg)[name]
    run = _run_dir(tmp_path, node)
    code = _exit_code([command, str(run)])
    _refused(code, capsys, f"{run / 'manifest.json'}: config.hydra.{key}", markers)


def _hydra_node(overrides: list[str]) -> dict:
    from hydra import compose, initialize_config_dir

    from tests.helpers.paths import REPO

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    return OmegaConf.to_container(cfg.hydra, resolve=False)


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["hydra/sweeper=optuna"],  # recall tune's
        *[["hydra/sweeper=optuna", f"hydra/sweeper/sampler={s}"] for s in ("random", "cmaes")],
        ["hydra/job_logging=stdout", "hydra/hydra_logging=hydra_debug"],
        ["hydra/job_logging=disabled", "hydra/hydra_logging=none"],
        ["+hydra.job.env_set.OMP_NUM_THREADS=1", "hydra.job.env_copy=[PATH]", "hydra.verbose=true"],
    ],
)
def test_the_projects_and_hydras_own_settings_pass(overrides):
    from pipeline.contract import hydra_keys

    node = _hydra_node(overrides)
    hydra_keys.check(node)  # no error
    assert node["job"]["env_set"].get("PATH", os.environ["PATH"]) == os.environ["PATH"]


def test_an_interpolated_target_is_refused_and_unchanged_environment_passes(monkeypatch):
    from pipeline.contract import hydra_keys

    monkeypatch.setenv("EVIL", "builtins.open")
    node = {"sweeper": {"_target_": "${oc.env:EVIL}"}}
    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\._target_='\$\{oc\.env:EVIL\}'"):
        hydra_keys.check(node)
    monkeypatch.setenv("LD_PRELOAD", "x.so")
    hydra_keys.check({"job": {"env_set": {"LD_PRELOAD": "x.so"}}})  # what env_copy writes
    with pytest.raises(ConfigError, match=r"^m: config\.hydra\.job\.env_set\.LD_PRELOAD='y\.so'"):
        hydra_keys.check({"job": {"env_set": {"LD_PRELOAD": "y.so"}}}, "m: config.hydra")
