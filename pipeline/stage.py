"""The stage interface: a name, the parameters it reads from its config group, ``run(ctx, params)``.

A stage's parameters are built once per run by ``Stage.params(run_state)``, as a rule
``Params.from_cfg(cfg.<group>)``; the defaults live
in the group's YAML only (``conf/<group>/*.yaml``), and a key the dataclass does not know is a
ConfigError naming it. The runner keeps a list of stages and loops: skip when disabled, time,
run, stop after ``RunState.until``. A stage's array core stays a pure function in ``ops/``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigError


class Params:
    """Base of the stage parameter dataclasses: ``from_cfg`` builds one from a config group."""

    @classmethod
    def from_cfg(cls, group, where: str | None = None, **extra):
        """The parameters in ``group`` (a DictConfig or dict) plus ``extra``; an unknown or a missing
        key is a ConfigError naming it (defaults live in the YAML, not here)."""
        conf = OmegaConf.to_container(group, resolve=True) if isinstance(group, DictConfig) else dict(group)
        conf |= extra
        where = where or cls.__name__
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown, missing = sorted(set(conf) - names), sorted(names - set(conf))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(names)}")
        if missing:
            raise ConfigError(f"{where}: missing key(s) {missing}; give them in the config group's YAML")
        return cls(**conf)


@dataclass(frozen=True)
class Stage:
    """One step of a query group's recall. ``params(cfg)`` builds what ``run`` takes (once per run);
    ``enabled(cfg)`` says whether it runs at all. ``params`` gets the ``RunState`` (config and device)."""
    name: str
    run: Callable[[Any, Any], Any]
    params: Callable[[Any], Any] = lambda run: None
    enabled: Callable[[DictConfig], bool] = lambda cfg: True
