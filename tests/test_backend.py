"""Device resolution: auto falls back to cpu without a GPU; an explicit cuda without one raises."""
import pytest

from pipeline import backend
from pipeline.errors import ConfigError


def test_auto_falls_back_and_cuda_raises(monkeypatch):
    monkeypatch.setattr(backend, "has_cuda", lambda: False)
    assert backend.resolve_device("auto") == "cpu"
    assert backend.resolve_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match="device=cuda but torch sees no CUDA GPU"):
        backend.resolve_device("cuda")


def test_unknown_device_lists_choices():
    with pytest.raises(ConfigError, match=r"device='gpu0' is not valid.*choose from \['auto', 'cpu', 'cuda'\]"):
        backend.resolve_device("gpu0")


def test_auto_uses_cuda_when_present(monkeypatch):
    monkeypatch.setattr(backend, "has_cuda", lambda: True)
    assert backend.resolve_device("auto") == "cuda"
