"""The values a config's ``hydra`` node may hold where Hydra imports or calls what it names.

Configs are data: a dotted path in a config is resolved only by ``pipeline.contract.registry``. Hydra itself
resolves some ``hydra`` keys before any pipeline code runs: it instantiates ``hydra.callbacks.*``,
``hydra.sweeper`` (the Optuna sweeper its ``sampler`` and ``custom_search_space``) and
``hydra.launcher`` (``_target_``, recursively), hands ``hydra.job_logging`` / ``hydra_logging`` to
``logging.config.dictConfig`` (which imports ``()`` factories, handler and formatter ``class`` and
``ext://`` values, and opens handler ``filename``), imports the packages ``hydra.searchpath`` names,
and sets ``hydra.job.env_set`` in the environment of the run and every process it starts
(``PYTHONPATH``, ``LD_PRELOAD``). Those keys may hold only what this project and Hydra's own
defaults configure (the tables below); anything else is a ConfigError naming the key, the value and
the fix. :func:`check` takes the plain ``hydra`` mapping, unresolved (an interpolation is refused
where a literal is expected); ``pipeline.cli.hydra_guard`` applies it to every config Hydra composes.
"""

from __future__ import annotations

import os
import re

from pipeline.contract.errors import ConfigError

# path under ``hydra`` → the ``_target_`` values allowed there; a ``_target_`` anywhere else is refused
TARGETS: dict[str, frozenset[str]] = {
    "sweeper": frozenset(
        {
            "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
            "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",  # recall tune
        }
    ),
    "launcher": frozenset({"hydra._internal.core_plugins.basic_launcher.BasicLauncher"}),
    "sweeper.sampler": frozenset(  # the samplers of hydra/sweeper/sampler (the Optuna plugin)
        f"optuna.samplers.{s}"
        for s in (
            "TPESampler",
            "RandomSampler",
            "CmaEsSampler",
            "NSGAIISampler",
            "MOTPESampler",
            "GridSampler",
        )
    ),
}
NULL_ONLY = {"sweeper.custom_search_space": "set search spaces in conf/tune_spaces.yaml"}
LOGGING = ("hydra_logging", "job_logging")
HANDLERS = frozenset({"logging.StreamHandler", "logging.FileHandler", "logging.NullHandler"})
FORMATTERS = frozenset({"logging.Formatter"})
STREAMS = frozenset({"ext://sys.stdout", "ext://sys.stderr"})
LOG_FILES = frozenset(  # Hydra's own: the job log in the run directory, hydra_debug's log
    {"${hydra.runtime.output_dir}/${hydra.job.name}.log", "hydra-${hydra.job.name}.log"}
)
ENV_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    }
)
ENV_PREFIX = "RECALL_"
JOB_NAME = re.compile(r"[\w.-]+")


def check(hydra: object, where: str = "hydra") -> None:
    """Raise a ConfigError at the first key of the ``hydra`` mapping that would make Hydra import or
    call something this project does not configure (see the module docstring); ``where`` prefixes
    the key in the message (``hydra``, or a manifest's ``<path>: config.hydra``)."""
    if hydra is None:
        return
    if not isinstance(hydra, dict):
        _refuse(where, hydra, "must be a mapping", "remove it or give Hydra's own settings")
    searchpath = hydra.get("searchpath")
    if searchpath:
        _refuse(
            f"{where}.searchpath",
            searchpath,
            "Hydra would import the packages it names",
            "put extra configs in a folder and pass --config-dir <folder>",
        )
    callbacks = hydra.get("callbacks") or {}
    for name, spec in callbacks.items() if isinstance(callbacks, dict) else [("", callbacks)]:
        _refuse(
            f"{where}.callbacks.{name}".rstrip("."),
            spec,
            "Hydra would import and call it; the pipeline runs no Hydra callbacks",
            "remove it from hydra.callbacks",
        )
    for path, value in NULL_ONLY.items():
        if _get(hydra, path) is not None:
            _refuse(f"{where}.{path}", _get(hydra, path), "Hydra would import and call it", value)
    _check_targets(hydra, where, "")
    for key in LOGGING:
        _check_logging(hydra.get(key), f"{where}.{key}", ())
    if isinstance(hydra.get("job"), dict):
        _check_job(hydra["job"], f"{where}.job")


def _get(node: dict, path: str):
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _refuse(key: str, value: object, why: str, fix: str) -> None:
    raise ConfigError(f"{key}={value!r}: {why}; {fix}")


def _children(node: object):
    if isinstance(node, dict):
        return [(str(k), v) for k, v in node.items()]
    if isinstance(node, list):
        return [(str(i), v) for i, v in enumerate(node)]
    return []


def _check_targets(node: object, where: str, path: str) -> None:
    """Every ``_target_`` under ``node`` (at ``path`` below ``hydra``) is one of ``TARGETS[path]``."""
    if isinstance(node, dict) and "_target_" in node:
        allowed = TARGETS.get(path, frozenset())
        if node["_target_"] not in allowed:
            fix = f"choose from {sorted(allowed)}" if allowed else "remove it"
            _refuse(
                f"{where}.{path}._target_",
                node["_target_"],
                "Hydra would import and call it; it is not a sweeper, launcher or sampler this "
                "project runs",
                fix,
            )
    for key, child in _children(node):
        if key not in LOGGING or path:  # the logging configs have their own rules
            _check_targets(child, where, f"{path}.{key}" if path else key)


def _check_logging(node: object, where: str, path: tuple[str, ...]) -> None:
    """A ``dictConfig`` mapping: no ``()`` factory, only ``HANDLERS`` / ``FORMATTERS`` classes, only
    ``STREAMS`` for ``ext://`` values, only Hydra's own ``LOG_FILES`` as a handler filename."""
    key = ".".join((where, *path))
    if isinstance(node, str) and node.startswith("ext://") and node not in STREAMS:
        _refuse(key, node, "logging would import it", f"use one of {sorted(STREAMS)}")
    if not isinstance(node, (dict, list)):
        return
    if isinstance(node, dict):
        if "()" in node:
            _refuse(
                f"{key}.()",
                node["()"],
                "logging would import and call it; the logging configs take no factories",
                f"remove it (handlers: class from {sorted(HANDLERS)})",
            )
        if "class" in node:
            allowed = {"handlers": HANDLERS, "formatters": FORMATTERS}.get(
                path[0] if len(path) == 2 else "", frozenset()
            )
            if node["class"] not in allowed:
                fix = f"choose from {sorted(allowed)}" if allowed else "remove it"
                _refuse(f"{key}.class", node["class"], "logging would import and call it", fix)
        if "filename" in node and node["filename"] not in LOG_FILES:
            _refuse(
                f"{key}.filename",
                node["filename"],
                "a log file outside the run directory",
                f"keep Hydra's {sorted(LOG_FILES)[0]!r}",
            )
    for k, child in _children(node):
        _check_logging(child, where, (*path, k))


def _check_job(job: dict, where: str) -> None:
    """``hydra.job.env_set`` changes only ``ENV_NAMES`` and ``RECALL_*`` (a value equal to the
    current environment's, e.g. from ``env_copy``, changes nothing); ``hydra.job.name`` (part of the
    job log's file name) is a plain file name."""
    env = job.get("env_set") or {}
    if not isinstance(env, dict):
        _refuse(f"{where}.env_set", env, "must be a mapping", "give NAME: value pairs")
    for name, value in env.items():
        if str(value) == os.environ.get(str(name)):
            continue
        if name not in ENV_NAMES and not str(name).startswith(ENV_PREFIX):
            _refuse(
                f"{where}.env_set.{name}",
                value,
                "Hydra would set it for the run and every process it starts",
                f"only {sorted(ENV_NAMES)} and {ENV_PREFIX}* may be set",
            )
    name = job.get("name")
    if name is not None and (not JOB_NAME.fullmatch(str(name)) or name in (".", "..")):
        _refuse(
            f"{where}.name",
            name,
            "it names the job log file",
            "use letters, digits, '_', '-' and '.' only",
        )
