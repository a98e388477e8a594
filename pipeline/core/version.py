"""The code version every cache key carries (the package version plus a hash of the source files),
and the versions of the main packages a manifest records (:func:`versions`).

A cached entry (candidates, recall cache, embeddings) is only as valid as the code that made it; a
version string alone does not change when the source is edited in place (an editable install).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from pathlib import Path

from pipeline.core import backend

ROOT = Path(__file__).resolve().parents[1]  # the pipeline package
__version__ = (
    "0.1.0"  # the release, as pyproject.toml's [project] version; ``pipeline.__version__``
)


def package_version(name: str = "recall-pipeline") -> str:
    """Installed version of the distribution ``name``, or ``0+unknown`` when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def source_hash(files) -> str:
    """sha256 over (path relative to the package, bytes) of ``files``, in sorted order; 16 hex digits."""
    h = hashlib.sha256()
    for p in sorted(Path(f).resolve() for f in files):
        h.update(p.relative_to(ROOT).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# the distributions whose code shapes a recall row (tokenizers, stemmers, BM25, FAISS, sparse and
# dense arithmetic, graph algorithms): a cached value made under other versions is not reused
RESULT_LIBS = (
    "numpy",
    "scipy",
    "polars",
    "bm25s",
    "PyStemmer",
    "rjieba",
    "jieba",
    "faiss-cpu",
    "faiss-gpu",
    "torch",
    "scikit-learn",
    "igraph",
    "leidenalg",
)


@functools.cache
def library_versions() -> str:
    """sha256 (12 hex digits) of ``name==version`` for each of :data:`RESULT_LIBS` (``0+unknown``
    for one that is not installed): part of :func:`code_version`."""
    pins = [f"{n}=={package_version(n)}" for n in RESULT_LIBS]
    return hashlib.sha256("\n".join(pins).encode()).hexdigest()[:12]


@functools.cache
def code_version() -> str:
    """``<package version>+<hash of every pipeline/**/*.py loaded from>+<library_versions()>``,
    computed once per process: every stage key, recipe and run-directory memo carries it."""
    return f"{package_version()}+{source_hash(ROOT.rglob('*.py'))}+{library_versions()}"


VERSIONS = (
    "recall-pipeline",
    "numpy",
    "polars",
    "pyarrow",
    "torch",
    "bm25s",
    "rjieba",
    "jieba",
    "pytrec-eval-terrier",
    "sentence-transformers",
    "hydra-core",
)


def versions() -> dict[str, str]:
    """Versions of the main packages, and of the FAISS / CuPy / cuGraph distributions actually imported."""
    out = backend.distributions()
    for name in VERSIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    out["recall-pipeline-code"] = code_version()  # package version + hash of the source
    return out
