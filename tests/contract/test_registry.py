"""Configs and run directories are data: a ``_target_`` is a registered name, never an import path.

Each trick below would create ``marker`` if it were called (``os.system``/``subprocess.run`` touch it,
the builtin ``open`` creates it); through every command that reads a config or a manifest it must
end in exit 2, one ``error:`` line, no traceback, and no marker.
"""

import json

import polars as pl
import pytest

from pipeline.cli.main import main
from pipeline.contract import registry
from pipeline.contract.errors import ConfigError


def _tricks(marker) -> dict[str, dict]:
    return {
        "os.system": {"_target_": "pipeline.contract.io.os.system", "command": f"touch {marker}"},
        "__builtins__": {
            "_target_": "pipeline.contract.io.__builtins__.open",
            "file": str(marker),
            "mode": "w",
        },
        "subprocess.run": {
            "_target_": "pipeline.run.tune.subprocess.run",
            "args": ["touch", str(marker)],
        },
        "old dotted path": {"_target_": "pipeline.adapters.sample.load"},
        "unknown name": {"_target_": "samples"},
        "not a string": {"_target_": ["sample"]},
    }


TRICKS = list(_tricks("m"))


def _run_dir(root, spec: dict):
    run = root / "run"
    run.mkdir()
    cfg = {"device": "cpu", "data": spec, "signals": {"path": None}, "inject": {"max_nodes": 5}}
    (run / "manifest.json").write_text(json.dumps({"config": cfg}))
    pl.DataFrame(
        {"query_id": ["q1"], "rank": [1], "node_id": ["n1"], "score": [1.0]}
    ).write_parquet(run / "recall.parquet")
    pl.DataFrame({"node_id": ["n1"]}).write_parquet(
        run / "signals.parquet"
    )  # feedback then reloads the data
    return run


def _refused(code, capsys, marker, where: str):
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert (
        len(lines) == 1
        and lines[0].startswith(f"error: {where}")
        and "choose from ['beir'," in lines[0]
    )
    assert not marker.exists()


@pytest.mark.parametrize("trick", TRICKS)
@pytest.mark.parametrize("command", ["analyze", "compare", "feedback"])
def test_manifest_targets_are_refused(tmp_path, capsys, command, trick):
    marker = tmp_path / "marker"
    run = _run_dir(tmp_path, _tricks(marker)[trick])
    _refused(main([command, str(run)]), capsys, marker, f"{run / 'manifest.json'}: config.data")


@pytest.mark.parametrize(
    "trick", ["os.system", "__builtins__", "subprocess.run", "old dotted path"]
)
def test_run_yaml_targets_are_refused(tmp_path, capsys, trick):
    """``recall run --config-dir <dir> --config-name <yaml>``: a user YAML over the package config."""
    marker = tmp_path / "marker"
    spec = _tricks(marker)[trick]
    (tmp_path / "evil.yaml").write_text(
        json.dumps({"defaults": ["config", "_self_"], "data": spec})
    )
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run",
                "--config-dir",
                str(tmp_path),
                "--config-name",
                "evil",
                "device=cpu",
                "embed=hashing",
                f"out_dir={tmp_path / 'out'}",
                f"cache_dir={tmp_path / 'cache'}",
            ]
        )
    _refused(exc.value.code, capsys, marker, "data._target_=")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_error_names_the_key_and_lists_the_names():
    with pytest.raises(ConfigError) as exc:
        registry.call(
            {"_target_": "pipeline.contract.io.os.system", "command": "true"}, "embed.encoder"
        )
    msg = str(exc.value)
    assert msg.startswith(
        "embed.encoder._target_='pipeline.contract.io.os.system' is not a registered target"
    )
    assert f"choose from {sorted(registry.TARGETS)}" in msg


def test_missing_target_and_non_mapping_are_config_errors():
    with pytest.raises(ConfigError, match=r"^data\._target_=None is not a registered target"):
        registry.call({"name": "sample"}, "data")
    with pytest.raises(ConfigError, match=r"^data must be a mapping with a _target_ key; got str"):
        registry.call("sample", "data")


def test_registered_name_with_a_key_it_does_not_take_is_a_config_error():
    with pytest.raises(
        ConfigError,
        match=r"^data: got an unexpected keyword argument 'command' for target 'sample'",
    ):
        registry.call({"_target_": "sample", "command": "touch x"}, "data")


def test_registered_names_call_the_pipeline_callables():
    from pipeline.adapters import sample
    from pipeline.encoders.models import HashingEmbedder

    assert registry.resolve("sample", "data") is sample.load
    enc = registry.call({"_target_": "hashing_embedder", "dim": 8}, "embed.encoder")
    assert isinstance(enc, HashingEmbedder) and enc.dim == 8


def test_every_registered_target_resolves_to_a_callable_of_this_package():
    for name, (module, _attr) in registry.TARGETS.items():
        assert module.startswith("pipeline.") and callable(registry.resolve(name, "test"))


def test_the_shared_helpers_import_no_stage_and_no_adapter():
    """The shared helpers (call_target, stage keys, the stage log) load the registry, which names its
    targets without importing them: no stage, no adapter comes with it."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    probe = (
        "import sys, pipeline.contract.registry, pipeline.core.memo, pipeline.core.stagelog\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pipeline.stages', 'pipeline.adapters'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
