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
from typing import Any, Callable, ClassVar

from omegaconf import DictConfig, OmegaConf

from pipeline.contract.errors import ConfigError


class Params:
    """Base of the stage parameter dataclasses. A subclass names its config group (``GROUP``, and
    ``SUBKEY`` for a nested block such as ``graph.hubs``) and the option :meth:`defaults` loads;
    its fields have no defaults: those live in the group's YAML. A field marked
    ``metadata={"runtime": True}`` is set by the stage at run time, never by the config."""

    GROUP: ClassVar[str] = ""
    OPTION: ClassVar[str] = "default"
    SUBKEY: ClassVar[str | None] = None

    @classmethod
    def config_keys(cls) -> set[str]:
        """The field names a config group must give (runtime fields excluded)."""
        return {f.name for f in dataclasses.fields(cls) if f.init and not f.metadata.get("runtime")}

    @classmethod
    def from_cfg(cls, group, where: str | None = None, **extra):
        """The parameters in ``group`` (a DictConfig or dict) plus ``extra``; an unknown or a missing
        key is a ConfigError naming it (defaults live in the YAML, not here)."""
        conf = (
            OmegaConf.to_container(group, resolve=True)
            if isinstance(group, DictConfig)
            else dict(group)
        )
        conf |= extra
        where = where or cls.GROUP or cls.__name__
        names = cls.config_keys()
        runtime = {f.name for f in dataclasses.fields(cls) if f.metadata.get("runtime")}
        unknown, missing = sorted(set(conf) - names - runtime), sorted(names - set(conf))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(names)}")
        if missing:
            raise ConfigError(
                f"{where}: missing key(s) {missing}; give them in the config group's YAML"
            )
        return cls(**conf)

    @classmethod
    def defaults(cls, option: str | None = None, **overrides):
        """The parameters of ``conf/<GROUP>/<option>.yaml`` (default ``OPTION``), with ``overrides``:
        for tests and library use, so no default is written twice."""
        conf = group_yaml(cls.GROUP, option or cls.OPTION)
        if cls.SUBKEY:
            conf = conf[cls.SUBKEY]
        return cls.from_cfg({**conf, **overrides}, f"{cls.GROUP}={option or cls.OPTION}")


def group_yaml(group: str, option: str) -> dict:
    """One option of a config group as a dict, with the sibling options its ``defaults:`` list
    names merged under it (``select/dpp.yaml`` starts from ``topk``), as Hydra composes it."""
    import yaml

    from pipeline.contract.paths import CONF_DIR

    doc = yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text()) or {}
    merged = OmegaConf.create({})
    for entry in doc.pop("defaults", None) or []:
        if isinstance(entry, str) and entry != "_self_":
            merged = OmegaConf.merge(merged, group_yaml(group, entry))
    return OmegaConf.to_container(OmegaConf.merge(merged, doc), resolve=True)


@dataclass(frozen=True)
class Stage:
    """One step of a query group's recall. ``params(cfg)`` builds what ``run`` takes (once per run);
    ``enabled(cfg)`` says whether it runs at all. ``params`` gets the ``RunState`` (config and device)."""

    name: str
    run: Callable[[Any, Any], Any]
    params: Callable[[Any], Any] = lambda run: None
    enabled: Callable[[DictConfig], bool] = lambda cfg: True
