"""Batch recall for agent memory: the ST-BME / ReMe / OKS family of recall algorithms, run over
thousands to millions of queries at once on a GPU or the CPU.

The Python API (README "Python API"):

- :func:`recall` runs a preset over a dataset as ``recall run`` does and returns a
  :class:`RecallResult` (the recall frame, metrics, manifest);
- :class:`RecallCache` looks entries up in the recall cache ``recall precompute`` writes;
  :func:`served` and :func:`injections` read its live generation whole;
- :class:`Dataset` is the in-memory data contract :func:`recall` also takes;
  :class:`UserError` is what every bad input raises (one line naming the file or option and the fix);
- ``__version__``.

Importing the package loads only the standard library (``pipeline.resolvers``): the hooks
(``pipeline.hooks``) run inside OKS's and Hermes' processes, which may have none of the batch
engine's dependencies. The names above are imported on first use (module ``__getattr__``).
"""

from pipeline import resolvers

resolvers.install()
__all__ = [
    "recall",
    "RecallResult",
    "RecallCache",
    "served",
    "injections",
    "Dataset",
    "UserError",
    "__version__",
]


def __getattr__(name: str):
    """The names of :data:`__all__`, each imported from its own module on first use."""
    if name == "__version__":
        from pipeline.core.version import __version__ as found
    elif name == "UserError":
        from pipeline.contract.errors import UserError as found
    elif name == "Dataset":
        from pipeline.contract.dataset import Dataset as found
    elif name == "RecallCache":
        from pipeline.recallcache.reader import RecallCache as found
    elif name in ("served", "injections"):
        from pipeline.run import precompute

        found = getattr(precompute, name)
    elif name in ("recall", "RecallResult"):
        from pipeline import api

        found = getattr(api, name)
    else:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    return found


def __dir__() -> list[str]:
    """The module's own names and those of :data:`__all__` (served on first use)."""
    return sorted(set(globals()) | set(__all__))
