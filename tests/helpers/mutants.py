"""Planted mutants for the differential harness (tests/system/test_differential.py): in each of channels,
hubs, diffusion, score and select, one statistic scaled by the size of the group or batch the
stage was handed — the bug class the harness exists to catch (a result that depends on what shares
its batch). Each is a monkeypatch of the stage's own function; no pipeline code changes.

``collab`` is of another class, a broken seal (issue 28): the collab channel's co-use counted over
every team's log rows, which ``differential.team_seal`` must catch.
"""

from __future__ import annotations

import contextlib
import dataclasses

import polars as pl


def _factor(n: int) -> float:
    return 1.0 + n / 1000.0


def channels(generate):
    """BM25 scores × (1 + the batch's query count / 1000)."""

    def mutant(nodes, queries, *a, **k):
        cand = generate(nodes, queries, *a, **k)
        return cand.with_columns(pl.col("lexical") * _factor(queries.height))

    return mutant


def hubs(build):
    """Unit–hub edge weights × (1 + the context's node count / 1000)."""

    def mutant(nodes, p, embed=None, seg=None, cache=None):
        out = build(nodes, p, embed, seg, cache)
        if out is not None:
            out.inc.data = (out.inc.data * _factor(nodes.height)).astype(out.inc.data.dtype)
        return out

    return mutant


def diffusion(scope):
    """Graph scores × (1 + the block's query count / 1000)."""

    def mutant(rows, qs, *a):
        return [f.with_columns(pl.col("graph") * _factor(len(qs))) for f in scope(rows, qs, *a)]

    return mutant


def score(scores):
    """Final score × (1 + the batch's query count / 1000)."""

    def mutant(cand, *a):
        out, s = scores(cand, *a)
        scaled = s.score * _factor(out["query_idx"].n_unique())
        return out, dataclasses.replace(s, score=scaled)

    return mutant


def select(dpp_greedy):
    """DPP quality × (1 + the torch batch's query count / 1000)."""

    def mutant(quality, emb, k, valid=None, **kw):
        return dpp_greedy(quality * _factor(quality.shape[0]), emb, k, valid, **kw)

    return mutant


class _AnyTeam(dict):
    """Items keyed ("", slug): a lookup of (team, slug) finds the pooled item of any team."""

    def get(self, key, default=None):
        return super().get(("", key[1]), default)


def collab(similarity):
    """The collab channel's similarity over the log with its ``team`` column blanked (every
    team's rows pooled), read by every team's queries."""

    def mutant(log, p):
        sim, items = similarity(log.with_columns(team=pl.lit("")), p)
        return sim, _AnyTeam(items)

    return mutant


def targets():
    """stage → (module, attribute, mutant factory)."""
    from pipeline.channels import collab as collab_mod
    from pipeline.ops import dpp
    from pipeline.stages import channels as ch
    from pipeline.stages import diffuse
    from pipeline.stages import hubs as hub_mod
    from pipeline.stages import score as sc

    return {
        "channels": (ch, "generate", channels),
        "hubs": (hub_mod, "build", hubs),
        "diffusion": (diffuse, "_scope", diffusion),
        "score": (sc, "scores", score),
        "select": (dpp, "dpp_greedy", select),
        "collab": (collab_mod, "similarity", collab),
    }


@contextlib.contextmanager
def planted(stage: str):
    """The mutant of ``stage`` in place for the block."""
    mod, name, make = targets()[stage]
    old = getattr(mod, name)
    setattr(mod, name, make(old))
    try:
        yield
    finally:
        setattr(mod, name, old)
