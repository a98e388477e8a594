"""Stage parameters: their defaults live in the config groups' YAML only (issue 15). For every
option file of every stage's group, the composed keys are exactly the dataclass's fields, so a
field without a YAML default, or a YAML key no stage reads, fails here; an unknown or a missing
key is a ConfigError naming it."""

import pytest

from pipeline.contract.errors import ConfigError
from pipeline.contract.paths import CONF_DIR
from pipeline.core.stage import group_yaml
from pipeline.stages.anchors import AnchorParams, CrossRecallParams
from pipeline.stages.channels import DenseParams, LexicalParams
from pipeline.stages.cooccur import CooccurParams
from pipeline.stages.diffuse import DiffusionParams
from pipeline.stages.graph import GraphParams
from pipeline.stages.hubs import HubParams
from pipeline.stages.novelty import NoveltyParams
from pipeline.stages.oks_backend import OksBackendParams
from pipeline.stages.probrecall import ProbRecallParams
from pipeline.stages.scope_policy import ScopeParams
from pipeline.stages.score import ScoreParams
from pipeline.stages.select import SelectParams
from pipeline.stages.signals import SignalsParams

PARAMS = [
    DenseParams,
    LexicalParams,
    GraphParams,
    HubParams,
    DiffusionParams,
    SignalsParams,
    ScopeParams,
    SelectParams,
    NoveltyParams,
    CooccurParams,
    AnchorParams,
    CrossRecallParams,
    ScoreParams,
    ProbRecallParams,
    OksBackendParams,
]
OPTIONS = [
    (cls, path.stem) for cls in PARAMS for path in sorted((CONF_DIR / cls.GROUP).glob("*.yaml"))
]


@pytest.mark.parametrize(("cls", "option"), OPTIONS, ids=[f"{c.__name__}-{o}" for c, o in OPTIONS])
def test_every_option_file_gives_exactly_the_dataclass_fields(cls, option):
    conf = group_yaml(cls.GROUP, option)
    conf = conf[cls.SUBKEY] if cls.SUBKEY else conf
    assert set(conf) == cls.config_keys()
    assert cls.from_cfg(conf) == cls.defaults(option)


def test_defaults_come_from_the_yaml_and_overrides_apply():
    p = DiffusionParams.defaults("ppr", seed_k=3)
    assert (p.method, p.damping, p.keep, p.seed_k, p.steps) == (
        "ppr",
        0.5,
        500,
        3,
        2,
    )  # conf/diffuse/{base,ppr}.yaml
    assert SelectParams.defaults("dpp").method == "dpp" and SelectParams.defaults().sort_by == ()


def test_an_unknown_or_a_missing_key_names_it():
    conf = group_yaml("select", "topk")
    with pytest.raises(ConfigError, match=r"select: unknown key\(s\) \['pool_multt'\]"):
        SelectParams.from_cfg({**conf, "pool_multt": 2}, "select")
    with pytest.raises(ConfigError, match=r"select: missing key\(s\) \['lam'\]"):
        SelectParams.from_cfg({k: v for k, v in conf.items() if k != "lam"}, "select")
