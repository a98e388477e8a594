"""Capability flags and the one device switch (``device: auto|cpu|cuda``), resolved once per run.

Flags are functions read at call time so tests can patch them; GPU libraries are imported lazily,
here only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys

from pipeline.contract.errors import ConfigError, require_one_of

log = logging.getLogger(__name__)
DEVICES = ("auto", "cpu", "cuda")
FALLBACKS: list[
    str
] = []  # why this run fell back (device, GPU libraries); copied into the manifest
GRAPH_IMPL: dict[str, str] = {}  # graph algorithm → library that computed it this run (manifest)
GPU_MODULES = ("faiss", "cupy", "cugraph")  # their installed distributions go into the manifest


def reset() -> None:
    """Forget the previous run's fallbacks and graph-library choices (called when a run starts)."""
    FALLBACKS.clear()
    GRAPH_IMPL.clear()


def fallback(reason: str) -> None:
    """Log a fallback once and remember it for the manifest."""
    if reason not in FALLBACKS:
        FALLBACKS.append(reason)
        log.warning(reason)


GPU_DEVICE_FILES = (
    "/dev/nvidiactl",
    "/dev/nvidia0",
    "/dev/dxg",
    "/proc/driver/nvidia",
)  # dxg: WSL2


def has_cuda() -> bool:
    """True when a GPU driver is present and torch sees a CUDA device."""
    import os

    if not any(os.path.exists(p) for p in GPU_DEVICE_FILES):
        return False  # no GPU driver: skip importing torch (seconds) just to hear "no"
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def has_cupy() -> bool:
    """True when CuPy is installed and a CUDA device is usable."""
    return importlib.util.find_spec("cupy") is not None and has_cuda()


def import_faiss():
    """The ``faiss`` module; without one, a ConfigError naming the extras that provide it."""
    try:
        import faiss
    except ImportError:
        raise ConfigError(
            "faiss is not installed; install exactly one extra: pip install -e '.[cpu]' "
            "(faiss-cpu) or '.[gpu]' (faiss-gpu-cu12)"
        ) from None
    return faiss


def faiss_gpus() -> int:
    """Number of GPUs the installed FAISS build can use (0 for faiss-cpu)."""
    faiss = import_faiss()
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get else 0


CPU_GRAPH_LIBS = {"pagerank": "scipy", "leiden": "leidenalg", "components": "scipy"}


def cugraph(device: str, algo: str):
    """The ``cugraph`` module for ``device="cuda"`` when it imports, else None (a fallback is noted);
    records in ``GRAPH_IMPL`` which library computes ``algo``."""
    lib = None
    if device == "cuda":
        try:
            import cugraph as lib
        except ImportError as exc:
            fallback(f"cugraph does not import ({exc}); PageRank, Leiden and components run on cpu")
    GRAPH_IMPL[algo] = "cugraph" if lib is not None else CPU_GRAPH_LIBS[algo]
    return lib


def on_cugraph(algo: str, gpu, cpu):
    """``gpu()`` (a cuGraph call); on any error the same answer from ``cpu()``, with a fallback note
    and ``GRAPH_IMPL[algo]`` set to the CPU library (cuGraph raises for inputs the CPU path takes)."""
    try:
        return gpu()
    except Exception as exc:  # any cuGraph failure has the same answer on the CPU
        fallback(f"cugraph {algo} failed ({type(exc).__name__}: {exc}); {algo} on cpu")
        GRAPH_IMPL[algo] = CPU_GRAPH_LIBS[algo]
        return cpu()


def distributions(modules=GPU_MODULES) -> dict[str, str]:
    """``{distribution: version}`` of the installed packages that provide each *imported* module of
    ``modules`` (e.g. ``faiss`` → ``faiss-cpu`` or ``faiss-gpu-cu12``; both listed when both are
    installed, which leaves one of them shadowing the other's ``faiss`` module)."""
    owners = importlib.metadata.packages_distributions()
    out = {}
    for mod in modules:
        if mod in sys.modules:
            for dist in owners.get(mod, []):
                out[dist] = importlib.metadata.version(dist)
    return dict(sorted(out.items()))


def faiss_summary() -> str:
    """Which FAISS module is loaded: its file, the distributions that provide it and its GPU count."""
    try:
        faiss = import_faiss()
    except ConfigError as exc:
        return str(exc)
    dists = distributions(("faiss",))
    listed = ", ".join(f"{d} {v}" for d, v in dists.items()) or "no distribution metadata"
    clash = (
        "; faiss-cpu and a faiss-gpu package share the 'faiss' module: install only one extra"
        if len(dists) > 1
        else ""
    )
    return f"faiss {getattr(faiss, '__version__', '?')} from {faiss.__file__} ({listed}), GPUs: {faiss_gpus()}{clash}"


def resolve_device(name: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu`` (logged); ``cuda`` without a GPU raises."""
    require_one_of("device", name, DEVICES)
    if name == "cpu":
        return "cpu"
    log.info("device=%s: %s", name, faiss_summary())
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


def to_device(device: str, fallback_to: str, *arrays) -> list:
    """``arrays`` (scipy.sparse or numpy) on ``device``: cupyx/cupy on cuda with CuPy, else as
    given (on cuda without CuPy, a fallback note "CuPy is not installed; <fallback_to>")."""
    if device == "cuda" and has_cupy():
        import cupy
        import cupyx.scipy.sparse as cusp

        return [cusp.csr_matrix(a) if hasattr(a, "tocsr") else cupy.asarray(a) for a in arrays]
    if device == "cuda":
        fallback(f"CuPy is not installed; {fallback_to}")
    return list(arrays)


def to_host(a):
    """A numpy array of ``a`` (a CuPy array is copied to the host; numpy is returned as is)."""
    import numpy

    return numpy.asarray(a.get() if hasattr(a, "get") else a)


def host_column(name: str, values, valid=None):
    """A polars Float64 column of ``values`` (numpy, or CuPy brought to the host in one transfer),
    null where ``valid`` (the same namespace, or None: every value defined) is False."""
    import polars as pl

    out = pl.Series(name, to_host(values), dtype=pl.Float64)
    if valid is None:
        return out
    ok = to_host(valid)
    return out if ok.all() else pl.select(pl.when(pl.Series(ok)).then(out)).to_series()


def scatter_extreme(out, index, values, how: str) -> None:
    """``out[index[j]] = max(out[index[j]], values[j])`` for every j (``how="max"``; ``"min"``
    alike), repeated indices included: ``numpy.maximum.at`` on the host, ``cupyx.scatter_max``
    on CuPy (``.at`` for ufuncs is not in every CuPy release). On CuPy a float64 ``out`` is
    scattered as :func:`float_keys` (uint64 in the floats' order, -0 below +0; ``values``
    NaN-free), since CuPy's float64 atomicMax/atomicMin round through ``fmaxf``/``fminf`` to
    float32 (``cupy/_core/include/cupy/atomics.cuh``): the host's exact extremes on both. numpy's
    float64 ``.at`` is exact already and twice as fast as the keys (scripts/bench/bench_fusion.py)."""
    xp, _ = namespaces(out)
    if out.dtype == xp.float64 and rounds_float64_scatter(out):
        keys = float_keys(out)
        scatter_extreme(keys, index, float_keys(values.astype(xp.float64, copy=False)), how)
        out[...] = keys_to_floats(keys)
        return
    if type(out).__module__.startswith("cupy"):
        import cupyx

        (cupyx.scatter_max if how == "max" else cupyx.scatter_min)(out, index, values)
        return
    import numpy

    (numpy.maximum if how == "max" else numpy.minimum).at(out, index, values)


SIGN_BIT = 1 << 63


def rounds_float64_scatter(out) -> bool:
    """Whether the array library of ``out`` rounds a float64 scatter max/min through float32
    (CuPy's atomics do; numpy's ``.at`` is exact)."""
    return type(out).__module__.startswith("cupy")


def float_keys(x):
    """float64 ``x`` (numpy or CuPy) as uint64 keys whose unsigned order is the floats' order
    (-0 just below +0, -inf lowest; a NaN sorts past +inf or below -inf by its sign): a
    non-negative float's bits with the sign bit set, a negative one's bits inverted."""
    xp, _ = namespaces(x)
    bits = xp.ascontiguousarray(x, dtype=xp.float64).view(xp.uint64)
    sign = xp.uint64(SIGN_BIT)
    return xp.where((bits & sign) != 0, ~bits, bits | sign)


def keys_to_floats(k):
    """The float64 values of :func:`float_keys` ``k`` (its inverse, to the bit)."""
    xp, _ = namespaces(k)
    sign = xp.uint64(SIGN_BIT)
    return xp.ascontiguousarray(xp.where((k & sign) != 0, k & ~sign, ~k)).view(xp.float64)


def bincount(x, weights=None, minlength: int = 0):
    """``xp.bincount`` that also takes an empty ``x`` (CuPy raises on it, and on ``minlength=0``):
    zeros of length ``minlength`` (int64 counts, or float64 sums with ``weights``)."""
    xp, _ = namespaces(x)
    if x.size == 0:
        return xp.zeros(minlength, xp.float64 if weights is not None else xp.int64)
    return (
        xp.bincount(x, weights=weights, minlength=minlength)
        if minlength > 0
        else xp.bincount(x, weights=weights)
    )
