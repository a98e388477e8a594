"""Compose every option of every config group (and every preset); every _target_ is a registered name."""

import pytest
from omegaconf import OmegaConf

from pipeline.contract.registry import TARGETS, call_target
from tests.helpers.paths import REPO

GROUPS = sorted(p.name for p in (REPO / "conf").iterdir() if p.is_dir())
OPTIONS = [(g, p.stem) for g in GROUPS for p in sorted((REPO / "conf" / g).glob("*.yaml"))]


def _targets(node, path=""):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "_target_":
                yield path, v
            yield from _targets(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _targets(v, f"{path}[{i}]")


def test_every_group_has_options():
    assert {"data", "embed", "dense", "lexical", "fuse", "preset", "evaluate"} <= set(GROUPS)


@pytest.mark.parametrize("group,option", OPTIONS)
def test_compose_every_option(compose, group, option):
    overrides = [f"{group}={option}"]
    if group == "data" and option in ("workspace", "beir"):
        overrides.append("data.path=/some/folder")
    cfg = compose(overrides)
    container = OmegaConf.to_container(cfg, resolve=True)
    for path, target in _targets(container):
        assert target in TARGETS, f"{group}={option}: {path} → {target}"
    assert container["channels"] and set(container["channels"]) <= {"dense", "lexical", "collab"}
    for ch in container["channels"]:
        assert ch in container["fuse"]["weights"]
    call_target(cfg.embed.encoder)  # encoders construct lazily (no model load here)


def test_call_target_refuses_import_paths():
    from pipeline.contract.errors import ConfigError

    for target in (
        "os.system",
        "pipeline.contract.io.os.system",
        "pipeline.encoders.models.HashingEmbedder",
    ):
        with pytest.raises(
            ConfigError, match=r"^embed\.encoder\._target_=.* is not a registered target"
        ):
            call_target({"_target_": target, "command": "true"}, "embed.encoder")


def test_preset_names_match_files(compose):
    for p in sorted((REPO / "conf" / "preset").glob("*.yaml")):
        assert compose([f"preset={p.stem}"]).preset_name == p.stem
