"""Hydra composes the configs of ``recall run`` (``--multirun`` and ``recall tune`` too) and
``recall precompute`` with :class:`GuardedConfigLoader`: each config it composes (the run's, a
sweep's and every job's) has its ``hydra`` node checked by :func:`pipeline.contract.hydra_keys.check`
before Hydra configures logging from it or instantiates callbacks, the sweeper or the launcher, and
``hydra.searchpath`` (from the primary config or the command line) is refused before Hydra imports
the packages it names. A refusal prints one ``error:`` line and exits 2.

Hydra builds its config loader inside ``hydra.main`` (``Hydra.create_main_hydra2``); it takes no
loader argument, so :func:`guarded` swaps the class that function constructs while the command runs
(the only hook: tests/cli/test_config_refusal.py fails if a Hydra release moves it). :func:`launch` runs
a command's Hydra job that way (``recall run``, ``precompute``, ``serve``, ``lookup``, ``mcp``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from hydra._internal import hydra as hydra_internal
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.config_repository import ConfigRepository
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from pipeline.contract import hydra_keys
from pipeline.contract.errors import ConfigError, reported


class GuardedConfigLoader(ConfigLoaderImpl):
    """Hydra's config loader, refusing the ``hydra`` settings ``pipeline.contract.hydra_keys`` refuses."""

    def load_configuration(self, config_name, overrides, run_mode, *args, **kwargs) -> DictConfig:
        """The composed config, after ``hydra.searchpath`` was checked before composing and the
        whole ``hydra`` node after it."""
        _or_exit(lambda: self._check_searchpath(config_name, overrides))
        cfg = super().load_configuration(config_name, overrides, run_mode, *args, **kwargs)
        _or_exit(lambda: hydra_keys.check(OmegaConf.to_container(cfg.hydra, resolve=False)))
        return cfg

    def _check_searchpath(self, config_name: str | None, overrides: list[str]) -> None:
        """Where Hydra reads ``hydra.searchpath`` from (a command-line override, else the primary
        config file alone) it must be empty: Hydra opens its entries while composing."""
        for o in OverridesParser.create().parse_overrides(overrides=overrides):
            if o.key_or_group.split("@")[0] == "hydra.searchpath":
                hydra_keys.check({"searchpath": o.value()}, "hydra")
        if config_name is None:
            return
        primary = ConfigRepository(self.get_search_path()).load_config(config_name)
        if primary is not None and OmegaConf.is_dict(primary.config):
            found = OmegaConf.select(
                primary.config, "hydra.searchpath", throw_on_resolution_failure=False
            )
            if found:
                found = OmegaConf.to_container(found) if OmegaConf.is_config(found) else found
                raise ConfigError(
                    f"{primary.path.removeprefix('file://')}/{config_name}.yaml: "
                    f"hydra.searchpath={found!r}: "
                    "Hydra would import the packages it names; put extra configs in a folder and "
                    "pass --config-dir <folder>"
                )


def _or_exit(check) -> None:
    status = reported(check)
    if status:
        raise SystemExit(status)


def compose(overrides: list[str]) -> DictConfig:
    """``conf/config.yaml`` composed with ``overrides`` through the guarded loader (Hydra's
    compose API: no job, no run directory); the one place outside a command's job that composes."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pipeline.contract.paths import CONF_DIR

    with guarded(), initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose("config", overrides=overrides)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """While inside, ``hydra.main`` composes with :class:`GuardedConfigLoader`."""
    saved = hydra_internal.ConfigLoaderImpl
    hydra_internal.ConfigLoaderImpl = GuardedConfigLoader
    try:
        yield
    finally:
        hydra_internal.ConfigLoaderImpl = saved


def launch(prog: str, overrides: list[str], task: Callable[[DictConfig], object]) -> None:
    """Run ``task`` as a Hydra job (``hydra.main``, ``conf/config.yaml``) on ``overrides``, with
    :class:`GuardedConfigLoader`; ``prog`` is the command Hydra's messages name. Hydra names the job
    (its log file, ``<job>.log``) after the module that defines ``task``."""
    import hydra

    from pipeline.contract.paths import CONF_DIR

    sys.argv = [prog, *overrides]  # hydra.main reads its command line from sys.argv
    with guarded():  # no hydra key of a user file makes Hydra import or call anything
        hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(task)()
