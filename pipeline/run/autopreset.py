"""``preset=auto``: ``best``, adapted to what a query group's corpus has.

Two pure functions and the glue that applies them once per query group:

- :func:`corpus_features` reads only the node table and the explicit edges among those nodes
  (never queries, never qrels): how many nodes have a temporal predecessor (``seq`` within a
  ``doc_id``), explicit edges per node, titled nodes, nodes whose text names another node's
  title, nodes with a speaker, nodes with an LLM-free entity (``ops.entities``), documents.
- :func:`overrides` turns them into config keys → values by the rules of :data:`RULES`.

Why per query group and not per run: scopes are sealed (docs/architecture.md), a query's result may
depend only on the nodes its group can see. Features of the whole node table would let a node
added in another scope flip a setting here, and ``recall precompute`` (which loads one scope at a
time) would disagree with ``recall run``. Per group, local, precompute and Ray runs compute the
same features from the same nodes, so they give the same answer by construction.
"""

from __future__ import annotations

import dataclasses
import json

import polars as pl
from omegaconf import OmegaConf

from pipeline.contract.errors import ConfigError

LINKED = 0.05  # a structural link type counts when at least this share of the nodes carries one
TITLED = 0.5  # titles count when at least half of the nodes carry one
MENTION_MIN_LEN = 3  # as graph.mention_min_len: shorter titles are not looked for
RULES = ("no_structure", "title_links")  # rule names (auto.skip turns single rules off)


def _temporal_share(nodes: pl.DataFrame) -> float:
    """Share of nodes with a predecessor in their document's ``seq`` order (the temporal chain)."""
    if "seq" not in nodes.columns or "doc_id" not in nodes.columns:
        return 0.0
    chained = nodes.filter(pl.col("seq").is_not_null() & pl.col("doc_id").is_not_null())
    return (chained.height - chained["doc_id"].n_unique()) / nodes.height if chained.height else 0.0


def _share(nodes: pl.DataFrame, col: str) -> float:
    """Share of nodes with a non-empty value in ``col`` (0 without the column)."""
    if col not in nodes.columns:
        return 0.0
    s = nodes[col].cast(pl.String).str.strip_chars()
    return float((s.is_not_null() & (s.str.len_chars() > 0)).sum()) / nodes.height


def _title_link_share(nodes: pl.DataFrame) -> float:
    """Share of nodes whose text names, as a whole word, the title of a node with another title
    (wiki-style links: what ``graph.mentions`` would turn into edges)."""
    if "title" not in nodes.columns:
        return 0.0
    from pipeline.ops.titles import TitleFinder

    titles = nodes["title"].to_list()
    finder = TitleFinder(titles, MENTION_MIN_LEN)
    if not finder:
        return 0.0
    own = [(t or "").strip() for t in titles]
    linked = sum(
        any(t != own[i] for t in finder.find(text, whole_word=True))
        for i, text in enumerate(nodes["text"].to_list())
    )
    return linked / nodes.height


def _entity_share(nodes: pl.DataFrame) -> float:
    """Share of nodes with at least one LLM-free entity (capitalised span, number, quoted title)."""
    from pipeline.ops.entities import extract

    return sum(bool(extract(t)) for t in nodes["text"].to_list()) / nodes.height


def corpus_features(nodes: pl.DataFrame, edges: pl.DataFrame | None) -> dict:
    """What a node table has, as shares of its nodes (rounded to 4 digits; see the module doc).
    ``edges`` are the explicit edges among these nodes (or None)."""
    n = nodes.height
    if n == 0:
        raise ConfigError("auto: corpus_features of an empty node table")
    n_edges = 0 if edges is None else edges.height
    docs = nodes["doc_id"].n_unique() if "doc_id" in nodes.columns else n
    feats = {
        "nodes": n,
        "nodes_per_doc": n / docs,
        "temporal": _temporal_share(nodes),
        "edges_per_node": n_edges / n,
        "titled": _share(nodes, "title"),
        "title_links": _title_link_share(nodes),
        "speakers": _share(nodes, "speaker"),
        "entities": _entity_share(nodes),
    }
    return {k: v if isinstance(v, int) else round(float(v), 4) for k, v in feats.items()}


def overrides(features: dict, skip: tuple | list = ()) -> dict:
    """Config keys → values for a group with these features; the rules are applied in order and
    a rule named in ``skip`` is not. Rules (thresholds fixed before any measurement):

    - ``no_structure``: no temporal chain, no explicit edges and no title links (each under
      :data:`LINKED` of the nodes) → the graph would only hold entity hubs between independent
      documents: diffusion off (``diffuse.method: none``; ranking by the fused channels).
    - ``title_links``: titled nodes (≥ :data:`TITLED`) whose texts name other nodes' titles
      (≥ :data:`LINKED`) → title-mention edges in the graph (``graph.mentions: true``).
    """
    bad = sorted(set(skip) - set(RULES))
    if bad:
        raise ConfigError(f"auto.skip: unknown rule(s) {bad}; the rules are {list(RULES)}")
    out: dict = {}
    structured = (
        features["temporal"] >= LINKED
        or features["edges_per_node"] >= LINKED
        or features["title_links"] >= LINKED
    )
    if "no_structure" not in skip and not structured:
        out["diffuse.method"] = "none"
    if (
        "title_links" not in skip
        and features["titled"] >= TITLED
        and features["title_links"] >= LINKED
    ):
        out["graph.mentions"] = True
    return out


def merged(cfg, over: dict):
    """``cfg`` with ``over`` (dotted keys → values) applied; a key it lacks is a ConfigError."""
    out = cfg.copy()
    for key, value in over.items():
        if OmegaConf.select(out, key, default=KeyError) is KeyError:
            raise ConfigError(f"auto: override of {key!r}, which the config does not have")
        OmegaConf.update(out, key, value, merge=False)
    return out


def group_state(state, ctx):
    """The RunState a group runs under: ``state`` itself unless ``auto.enabled``; else one whose
    config carries this group's overrides (one derived state per distinct override set, so the
    per-run parameters are built once per set). Each group's features and overrides are counted
    in ``state.consts["auto"]`` (the manifest's ``auto``)."""
    auto = state.cfg.get("auto")
    if not auto or not auto.get("enabled"):
        return state
    from pipeline.core.memo import corpus_step

    feats = corpus_step(
        state.memo, "auto_features", ctx.nodes, lambda: corpus_features(ctx.nodes, ctx.edges)
    )
    over = overrides(feats, list(auto.get("skip") or []))
    seen = state.consts.setdefault("auto", {})
    entry = json.dumps({"features": feats, "overrides": over}, sort_keys=True)
    seen[entry] = seen.get(entry, 0) + 1
    key = "auto_state:" + json.dumps(over, sort_keys=True)
    return state.const(
        key, lambda: dataclasses.replace(state, cfg=merged(state.cfg, over), consts={})
    )


def summary(counts: dict) -> list[dict]:
    """``state.consts["auto"]`` (or several merged) as the manifest's list: one entry per distinct
    (features, overrides), with the number of query groups it held, in a fixed order."""
    return [{**json.loads(k), "groups": n} for k, n in sorted(counts.items())]
