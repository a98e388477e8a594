"""Device resolution: auto falls back to cpu without a GPU; an explicit cuda without one raises."""

import pytest

from pipeline.contract.errors import ConfigError
from pipeline.core import backend


def test_auto_falls_back_and_cuda_raises(monkeypatch):
    monkeypatch.setattr(backend, "has_cuda", lambda: False)
    assert backend.resolve_device("auto") == "cpu"
    assert backend.resolve_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="device=cuda but torch sees no CUDA GPU"):
        backend.resolve_device("cuda")


def test_unknown_device_lists_choices():
    with pytest.raises(
        ConfigError, match=r"device='gpu0' is not valid.*choose from \['auto', 'cpu', 'cuda'\]"
    ):
        backend.resolve_device("gpu0")


def test_auto_uses_cuda_when_present(monkeypatch):
    monkeypatch.setattr(backend, "has_cuda", lambda: True)
    assert backend.resolve_device("auto") == "cuda"


def test_auto_logs_the_faiss_module_it_loaded(monkeypatch, caplog):
    import importlib.metadata
    import logging

    import faiss

    monkeypatch.setattr(backend, "has_cuda", lambda: False)
    with caplog.at_level(logging.INFO, logger="pipeline.core.backend"):
        backend.resolve_device("auto")
    line = next(r.getMessage() for r in caplog.records if "faiss" in r.getMessage())
    assert faiss.__file__ in line and f"faiss-cpu {importlib.metadata.version('faiss-cpu')}" in line
    assert line.endswith("GPUs: 0")  # the CPU wheel: no GPU and no second distribution


def test_distributions_lists_only_imported_gpu_modules(monkeypatch):
    import importlib.metadata
    import sys

    import faiss  # noqa: F401

    monkeypatch.setattr(
        importlib.metadata,
        "packages_distributions",
        lambda: {"faiss": ["faiss-cpu", "faiss-gpu-cu12"], "cupy": ["cupy-cuda12x"]},
    )
    monkeypatch.setattr(
        importlib.metadata, "version", lambda d: {"faiss-cpu": "1.0", "faiss-gpu-cu12": "2.0"}[d]
    )
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert backend.distributions() == {
        "faiss-cpu": "1.0",
        "faiss-gpu-cu12": "2.0",
    }  # cupy not imported
    assert "share the 'faiss' module: install only one extra" in backend.faiss_summary()


def test_no_faiss_is_a_config_error_naming_the_extras(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss → ImportError
    with pytest.raises(ConfigError, match=r"faiss is not installed.*'\.\[cpu\]'.*'\.\[gpu\]'"):
        backend.import_faiss()
    assert backend.faiss_summary().startswith("faiss is not installed")
