"""Leave-one-dataset-out recipe selection: fit on all datasets but one, report on the one left out.

A recipe's fit score is its WORST shortfall, over the fit datasets, from the best candidate on that
dataset (its regret, in the dataset's own metric: R@5 points on one set and nDCG on another are not
comparable, shortfalls from the best are). The recipe with the smallest worst shortfall is chosen
(ties: the one listed first), and its held-out mean is reported with a bootstrap interval next to the
held-out oracle (the candidate best on the held-out set, which selection could not see)."""

from __future__ import annotations

import polars as pl

from pipeline.contract.errors import ConfigError
from pipeline.report.bootstrap import bootstrap_ci, paired_difference

Scores = dict[str, dict[str, float]]  # recipe → dataset → mean of the dataset's metric


def means(per_query: dict[tuple[str, str], pl.DataFrame], metric: dict[str, str]) -> Scores:
    """{(recipe, dataset): per-query table} → recipe → dataset → mean of that dataset's metric."""
    out: Scores = {}
    for (recipe, data), table in per_query.items():
        out.setdefault(recipe, {})[data] = float(table[metric[data]].mean())
    return out


def worst_regret(scores: Scores, recipe: str, fit: list[str]) -> float:
    """max over fit datasets of (best candidate's score − this recipe's score); 0 = best everywhere."""
    return max(max(s[d] for s in scores.values()) - scores[recipe][d] for d in fit)


def choose_recipe(scores: Scores, fit: list[str], recipes: list[str]) -> str:
    """The recipe with the smallest worst regret on ``fit`` (the first listed on a tie)."""
    missing = [(r, d) for r in recipes for d in fit if d not in scores.get(r, {})]
    if missing:
        raise ConfigError(
            f"leave-one-dataset-out: no score for (recipe, dataset) {missing}; run them first"
        )
    regrets = [worst_regret(scores, r, fit) for r in recipes]
    return recipes[min(range(len(recipes)), key=lambda i: (round(regrets[i], 12), i))]


def lodo_table(
    per_query: dict[tuple[str, str], pl.DataFrame], metric: dict[str, str], recipes: list[str]
) -> pl.DataFrame:
    """One row per held-out dataset: the recipe chosen on the others, its worst fit regret, its
    held-out mean with 95% interval, and the held-out oracle recipe and mean."""
    scores = means(per_query, metric)
    datasets = list(metric)
    rows = []
    for held in datasets:
        fit = [d for d in datasets if d != held]
        chosen = choose_recipe(scores, fit, recipes)
        ci = bootstrap_ci(per_query[(chosen, held)][metric[held]].to_numpy())
        oracle = max(recipes, key=lambda r: scores[r][held])
        rows.append(
            {
                "held_out": held,
                "metric": metric[held],
                "chosen": chosen,
                "fit_worst_regret": worst_regret(scores, chosen, fit),
                "n": ci.n,
                "held_out_mean": ci.mean,
                "low": ci.low,
                "high": ci.high,
                "oracle": oracle,
                "oracle_mean": scores[oracle][held],
            }
        )
    return pl.DataFrame(rows)


def half_gains(
    per_query: dict[tuple[str, str], pl.DataFrame],
    metric: dict[str, str],
    baseline: str,
    recipes: list[str],
) -> pl.DataFrame:
    """Each recipe's per-query gain over ``baseline`` on each dataset's query halves ``a`` and ``b``
    (``recall tune`` fits on a; b is held out), with a paired 95% interval: a per-dataset recipe is
    worth keeping when its half-b interval lies above 0."""
    from pipeline.contract.ingest import query_half

    rows = []
    for data, m in metric.items():
        base = per_query[(baseline, data)]
        for recipe in (r for r in recipes if r != baseline):
            for half in ("a", "b"):
                ids = query_half(base.select("query_id"), half)
                ci = paired_difference(per_query[(recipe, data)].join(ids, on="query_id"), base, m)
                rows.append(
                    {
                        "dataset": data,
                        "metric": m,
                        "recipe": recipe,
                        "half": half,
                        "n": ci.n,
                        "gain": ci.mean,
                        "low": ci.low,
                        "high": ci.high,
                    }
                )
    return pl.DataFrame(rows)
