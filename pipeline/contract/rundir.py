"""What a run directory holds: every file name a run (and ``recall analyze``/``feedback`` on it) may
write, so a rerun into the same folder starts from none of them and the manifest lists only its own.

Why "remove every known output first" and not "write into a temporary folder and swap it in":
Hydra owns ``out_dir`` (it creates it and writes ``.hydra/`` and the job log into it before the run
starts, and keeps the log open), and ``out_dir`` may hold files that are not the pipeline's; a
directory swap would have to carry the former and could delete the latter. Crash safety is
unchanged: the manifest goes first, every file is written atomically, the manifest is written last.
A test runs with every optional output on and checks that each file written is named here.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

MANIFEST = "manifest.json"
OUTPUTS = (
    "recall.parquet",
    "injection.parquet",
    "novelty.parquet",
    "signals.parquet",
    "metrics.json",
    "per_query.parquet",
    "topics.parquet",
    "node_topics.parquet",
    "recall_topics.parquet",  # analyze (in the run or after it)
    "report.md",
    "report.html",
    "report-*.png",  # the report, written after the manifest
    "signals-r*.parquet",  # recall feedback's revisions of this run's signals
    ".*.tmp",  # an atomic write a crash interrupted (pipeline.contract.io.atomic_write)
)


def is_output(name: str, patterns=OUTPUTS) -> bool:
    """True when the file name matches one of the run-output patterns."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _inputs(cfg: DictConfig | dict | None, out_dir: Path) -> set[Path]:
    """Files inside ``out_dir`` that the config names (a signals table kept in the run folder, say):
    inputs, never removed or listed as outputs."""
    if cfg is None:
        return set()
    conf = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    found, stack = set(), [conf]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and node and Path(node).resolve().parent == out_dir.resolve():
            found.add(Path(node).resolve())
    return found


def clear(out_dir: Path, cfg: DictConfig | None = None) -> list[str]:
    """Remove the manifest (first: nothing looks finished while we work), then every known output
    a previous run left in ``out_dir``; returns the names removed."""
    out_dir = Path(out_dir)
    (out_dir / MANIFEST).unlink(missing_ok=True)
    keep = _inputs(cfg, out_dir)
    gone = sorted(
        p.name
        for p in out_dir.iterdir()
        if p.is_file() and is_output(p.name) and p.resolve() not in keep
    )
    for name in gone:
        (out_dir / name).unlink(missing_ok=True)
    return gone


def outputs(out_dir: Path, cfg: DictConfig | dict | None = None) -> list[str]:
    """The run's output files present in ``out_dir`` (for ``manifest.outputs``), in name order."""
    out_dir = Path(out_dir)
    keep = _inputs(cfg, out_dir)
    return sorted(
        p.name
        for p in out_dir.iterdir()
        if p.is_file()
        and is_output(p.name)
        and not p.name.startswith(".")
        and p.resolve() not in keep
    )


RENAMED = {
    "fusion": "fuse",
    "eval": "evaluate",
    "scope": "scope_policy",
}  # config group names of run directories written before 0.1.0's group renames
MOVED = {
    ("query", "anchors"): ("anchors", "enabled"),
    ("query", "anchor_energy"): ("anchors", "energy"),
    ("query", "anchor_min_len"): ("anchors", "min_len"),
    ("query", "cross_recall"): ("cross_recall", "enabled"),
    ("query", "cross_mult"): ("cross_recall", "mult"),
    ("novelty", "seed_diffusion"): ("diffuse", "residual_seeds"),
}


# keys a group gained after runs were written: (group, key) → the value those runs had in effect
ADDED = {
    ("lexical", "prf_docs"): 0,
    ("lexical", "prf_terms"): 10,
    ("lexical", "prf_weight"): 0.5,
    ("lexical", "scorer"): "scipy",  # the host product every run used before (the same bits)
}


def upgrade_config(conf: dict, where: str = "manifest.json: config") -> dict:
    """A run directory's config (``manifest.json``) in today's group layout: runs written before the
    config groups mirrored the stages (``fusion``, ``eval``, ``scope``, anchors and cross recall
    under ``query``, ``query.cooccur``, ``select.prob_recall``, ``novelty.seed_diffusion``) still
    load in ``analyze``, ``compare``, ``report`` and ``feedback``; keys added since (``ADDED``) get
    the value the run had in effect. A current config comes back equal. A ``hydra`` node (a run
    writes none) is checked like a composed one (``pipeline.contract.hydra_keys``; ``where`` names the
    manifest in the error)."""
    from pipeline.contract.hydra_keys import check

    check(conf.get("hydra"), f"{where}.hydra")
    out = {RENAMED.get(k, k): (dict(v) if isinstance(v, dict) else v) for k, v in conf.items()}
    for (group, key), (new_group, new_key) in MOVED.items():
        if key in out.get(group, {}):
            out.setdefault(new_group, {})[new_key] = out[group].pop(key)
    for group, key in (("query", "cooccur"), ("select", "prob_recall")):
        if key in out.get(group, {}):
            out[key] = out[group].pop(key)
    for (group, key), value in ADDED.items():  # keys added since, with the value that is "off"
        if isinstance(out.get(group), dict):
            out[group].setdefault(key, value)
    return out
