"""Shared fixtures: a session embedding cache and Hydra config composition (CPU, outputs under
tmp_path). The paths they use (and tests import) are in ``tests/helpers/paths.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.paths import REPO, SHARED_DATA

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One embedding cache for the whole test session (never inside ../shared)."""
    return tmp_path_factory.mktemp("emb-cache")


@pytest.fixture
def compose(tmp_path, cache_dir):
    """compose(overrides) → a composed config with device=cpu and out_dir/cache under tmp paths."""
    from hydra import compose as hcompose
    from hydra import initialize_config_dir

    def _compose(overrides: list[str] = ()):
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            return hcompose(
                "config",
                overrides=[
                    "device=cpu",
                    f"out_dir={tmp_path / 'run'}",
                    f"cache_dir={cache_dir}",
                    f"data_dir={SHARED_DATA}",
                    *overrides,
                ],
                return_hydra_config=False,
            )

    return _compose
