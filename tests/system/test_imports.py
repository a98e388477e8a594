"""Start-up cost: importing the runner and the CLI loads none of the heavy libraries; each stage
that needs one imports it itself (issue 14)."""

import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

HEAVY = (
    "torch",
    "faiss",
    "sentence_transformers",
    "transformers",
    "matplotlib",
    "ray",
    "ranx",
    "numba",
    "optuna",
    "sklearn",
)


def _loaded(code: str) -> list[str]:
    probe = (
        f"import sys\n{code}\nprint('loaded:', *sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    return out.stdout.rsplit("loaded:", 1)[1].split()


def test_runner_report_and_evaluate_import_no_heavy_library():
    assert _loaded("import pipeline.run.runner, pipeline.report, pipeline.metrics.evaluate") == []


def test_cli_help_imports_neither_hydra_nor_heavy_libraries():
    assert (
        _loaded(
            "from pipeline.cli.main import main\nmain(['--help'])\nassert 'hydra' not in sys.modules"
        )
        == []
    )


def test_has_cuda_without_a_gpu_driver_does_not_import_torch(monkeypatch):
    from pipeline.core import backend

    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"torch.{name} was used")

    monkeypatch.setattr(backend, "GPU_DEVICE_FILES", ("/nonexistent/nvidia0",))
    monkeypatch.setitem(sys.modules, "torch", Untouchable())
    assert backend.has_cuda() is False
    monkeypatch.setattr(
        backend, "GPU_DEVICE_FILES", (str(REPO),)
    )  # "a driver is there": torch is asked
    with pytest.raises(AssertionError, match="torch.cuda was used"):
        backend.has_cuda()
