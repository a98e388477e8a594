"""Capability flags and the one device switch (``device: auto|cpu|cuda``), resolved once per run.

Flags are functions read at call time so tests can patch them; GPU libraries are imported lazily,
here only.
"""
from __future__ import annotations

import importlib.util
import logging

from pipeline.errors import ConfigError, choose

log = logging.getLogger(__name__)
DEVICES = ("auto", "cpu", "cuda")
FALLBACKS: list[str] = []  # why this run fell back (device, GPU libraries); copied into the manifest


def fallback(reason: str) -> None:
    """Log a fallback once and remember it for the manifest."""
    if reason not in FALLBACKS:
        FALLBACKS.append(reason)
        log.warning(reason)


GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/proc/driver/nvidia")  # dxg: WSL2


def has_cuda() -> bool:
    import os

    if not any(os.path.exists(p) for p in GPU_DEVICE_FILES):
        return False  # no GPU driver: skip importing torch (seconds) just to hear "no"
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def has_cupy() -> bool:
    return importlib.util.find_spec("cupy") is not None and has_cuda()


def faiss_gpus() -> int:
    import faiss

    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get else 0


def resolve_device(name: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu`` (logged); ``cuda`` without a GPU raises."""
    choose("device", name, DEVICES)
    if name == "cpu":
        return "cpu"
    if has_cuda():
        return "cuda"
    if name == "cuda":
        raise ConfigError("device=cuda but torch sees no CUDA GPU; use device=auto or device=cpu")
    fallback("device=auto: torch sees no CUDA GPU; using cpu")
    return "cpu"


def namespaces(x):
    """(xp, sp) for an array: numpy/scipy.sparse, or cupy/cupyx.scipy.sparse for a cupy array."""
    if type(x).__module__.startswith("cupy"):
        import cupy
        import cupyx.scipy.sparse as cusp

        return cupy, cusp
    import numpy
    import scipy.sparse

    return numpy, scipy.sparse
