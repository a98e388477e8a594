"""The callables a config or a manifest may name as ``_target_``: short names, never import paths.

Configs and run directories are data. Hydra's own ``_target_`` resolution imports any dotted path and
walks attributes (``pipeline.contract.io.os.system`` reaches ``os.system``), so a manifest could run a shell
command under ``recall analyze``. Here a target is a key of ``TARGETS`` or an error that lists them.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from pipeline.contract.errors import ConfigError

# name → (module inside this package, attribute): a fixed table written here, never read from a
# config; the module is imported when its target is first called (so importing the registry, and
# call_target with it, loads no adapter and no stage)
TARGETS: dict[str, tuple[str, str]] = {
    # data adapters (conf/data/*.yaml): path, name, limit_queries, ... → Dataset
    "beir": ("pipeline.adapters.beir", "load"),
    "bme": ("pipeline.adapters.bme", "load"),
    "locomo": ("pipeline.adapters.locomo", "load"),
    "musique": ("pipeline.adapters.musique", "load"),
    "oks": ("pipeline.adapters.oks", "load"),
    "parquet": ("pipeline.adapters.parquet", "load"),
    "reme": ("pipeline.adapters.reme", "load"),
    "sample": ("pipeline.adapters.sample", "load"),
    "workspace": ("pipeline.adapters.workspace", "load"),
    # text encoders (conf/embed/*.yaml: embed.encoder)
    "hashing_embedder": ("pipeline.encoders.models", "HashingEmbedder"),
    "sentence_encoder": ("pipeline.encoders.models", "SentenceEncoder"),
    "token_hash_embedder": ("pipeline.encoders.models", "TokenHashEmbedder"),
}


CHANNEL_GROUP = "recall_pipeline.channels"


def installed_channels() -> dict[str, Callable]:
    """Channels that installed packages add, as OKS registers search backends (``entry_points(
    group="oks_search_backend")``, spec §3.a): entry points of group ``recall_pipeline.channels``,
    name → a loader of ``fn(first, nodes, queries, parts) -> (query_idx, node_idx, <name>_rank,
    <name>)``. Installed code is trusted; a config names a channel only by its entry-point name."""
    from importlib.metadata import entry_points

    return {ep.name: ep.load for ep in entry_points(group=CHANNEL_GROUP)}


def call(spec: object, where: str, **extra):
    """Call the callable named by ``spec["_target_"]`` with the other keys (and ``extra``) as kwargs,
    after checking they fit its signature, so a bad key is a ConfigError and not a TypeError."""
    if not isinstance(spec, dict):
        raise ConfigError(
            f"{where} must be a mapping with a _target_ key; got {type(spec).__name__}"
        )
    kwargs = {k: v for k, v in spec.items() if k != "_target_"}
    fn = resolve(spec.get("_target_"), where)
    try:
        inspect.signature(fn).bind(**kwargs, **extra)
    except TypeError as exc:
        raise ConfigError(
            f"{where}: {exc} for target {spec['_target_']!r}; fix the keys of {where}"
        ) from None
    return fn(**kwargs, **extra)


def resolve(name: object, where: str) -> Callable:
    """The registered callable called ``name``; ``where`` names the config key (and file) for the error."""
    if isinstance(name, str) and name in TARGETS:
        module, attr = TARGETS[name]
        return getattr(importlib.import_module(module), attr)
    raise ConfigError(
        f"{where}._target_={name!r} is not a registered target (targets are names, not import "
        f"paths); choose from {sorted(TARGETS)}"
    )


def call_target(spec: DictConfig | dict, where: str | None = None, **extra):
    """Call the registered callable named by ``spec._target_`` (:data:`TARGETS`) with the
    remaining keys as kwargs; ``where`` names the config key for errors (default: the node's key)."""
    if where is None:
        where = (spec._get_full_key(None) if isinstance(spec, DictConfig) else None) or "config"
    spec = OmegaConf.to_container(spec, resolve=True) if isinstance(spec, DictConfig) else spec
    return call(spec, where, **extra)
