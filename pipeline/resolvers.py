"""The OmegaConf resolvers the config files use, registered without importing omegaconf here.

Arithmetic for config values derived from others, e.g. ReMe's candidates = min(200, int(k × 5)):
``${min:200,${mul:${k},5}}``; ``${if_eq:${inject.format},oks,10,5}``: one value for one setting
of another key. ``pipeline/__init__.py`` calls :func:`install`: when omegaconf is already loaded
the resolvers are registered at once, otherwise the first ``import omegaconf`` anywhere in the
process registers them as it finishes. So ``import pipeline.hooks.oks`` (OKS's and Hermes'
processes, a ``--no-deps`` install) loads nothing of omegaconf, and every config composed later
still resolves them.
"""

from __future__ import annotations

import importlib.abc
import sys


def _mul(a, b) -> int:
    return max(1, int(a * b))  # integer, >= 1


def _if_eq(a, b, then, other):
    return then if str(a) == str(b) else other


def register(omegaconf) -> None:
    """Register ``min``, ``mul`` and ``if_eq`` on the loaded ``omegaconf`` module."""
    conf = omegaconf.OmegaConf
    conf.register_new_resolver("min", lambda *xs: min(xs), replace=True)
    conf.register_new_resolver("mul", _mul, replace=True)
    conf.register_new_resolver("if_eq", _if_eq, replace=True)


class _Loader(importlib.abc.Loader):
    """omegaconf's own loader, then :func:`register` on the finished module."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        register(module)

    def __getattr__(self, name):  # get_resource_reader, get_filename, is_package, …
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``omegaconf`` as the other finders do and wraps its loader (once)."""

    def find_spec(self, name, path, target=None):
        if name != "omegaconf":
            return None
        sys.meta_path.remove(self)  # the real spec, from the other finders
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    """Register the resolvers now if omegaconf is loaded, else when it is first imported."""
    if "omegaconf" in sys.modules:
        register(sys.modules["omegaconf"])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
