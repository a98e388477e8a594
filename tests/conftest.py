"""Shared fixtures: paths to bundled fixtures and to ../shared/data, a session embedding cache,
and Hydra config composition (CPU, outputs under tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
TESTS_DATA = REPO / "tests" / "data"
SHARED_DATA = Path(os.environ.get("RECALL_DATA_DIR", REPO.parent / "shared" / "data"))
TINY_WS = TESTS_DATA / "workspace_tiny"


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


def tiny_ws_overrides() -> list[str]:
    return [
        "data=workspace",
        f"data.path={TINY_WS / 'notes'}",
        f"data.queries={TINY_WS / 'queries.jsonl'}",
        f"data.qrels={TINY_WS / 'qrels.tsv'}",
    ]


def needs_shared(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"benchmark data not found at {path}")
