"""Leave-one-dataset-out: run each candidate recipe on every dataset, choose a recipe on two datasets
by its WORST shortfall from the best candidate there, report it on the third with a 95% interval.

    python scripts/lodo.py [--out runs/lodo] [--data locomo,musique,scifact] [--only-table] [-- extra=overrides]
    python scripts/lodo.py --search 24 --seed 13 --out runs/lodo   # and a recipe search in each fold

Each recipe is one `python -m pipeline run --multirun data=<sets> <recipe overrides> report=false`
under OUT/<recipe>; a recipe whose runs are all there already is not rerun. Extra Hydra overrides
after `--` go to every run (e.g. `embed=hashing` for a quick check of the harness). The selection is
`pipeline.report.lodo`; metrics per dataset below (the issue's headline numbers). A third table
gives each recipe's paired gain over `best` on the query halves a / b (`recall tune` fits on a).

`--search N` adds N recipes drawn at random (seeded) from the `best` search space of
conf/tune_spaces.yaml (`pipeline.run.tune.sample_space`), each `preset=best` plus its drawn values, as
`search-00` ... Every recipe runs on every set once, so each fold's choice among all candidates is a
random search on its two fit sets scored by the worst shortfall, and the held-out set never takes part.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import polars as pl

from pipeline.contract.errors import DataError, reported, require_one_of
from pipeline.report.compare import markdown_table
from pipeline.report.lodo import half_gains, lodo_table
from pipeline.run.tune import sample_space, search_space

RECIPES = {  # name → Hydra overrides; the first listed wins ties
    "best": ["preset=best"],
    "best_musique": ["preset=best_musique"],
    "best_scifact": ["preset=best_scifact"],
    "best-no-diffusion": ["preset=best", "diffuse=none"],
    "auto": [
        "preset=auto"
    ],  # best adapted per query group to its corpus (pipeline/run/autopreset.py)
}
METRIC = {"locomo": "recall@5", "musique": "recall@5", "scifact": "ndcg@10"}


def searched(n: int, seed: int) -> dict[str, list[str]]:
    """``n`` recipes drawn from the ``best`` search space: name → Hydra overrides."""
    points = sample_space(search_space("best"), n, seed)
    return {
        f"search-{i:02d}": ["preset=best", *[f"{k}={v:.6g}" for k, v in p.items()]]
        for i, p in enumerate(points)
    }


def candidates(recipes: dict, search_only: bool) -> list[str]:
    """The recipes a fold chooses among: all, or (``--search-only``) only the drawn ones, none of
    which was fitted on any dataset."""
    names = [r for r in recipes if not search_only or r not in RECIPES]
    if not names:
        raise DataError("--search-only", "no drawn recipes", "give --search N with N > 0")
    return names


def run_dirs(out: Path) -> dict[str, Path]:
    """dataset name → finished run directory under ``out`` (one per dataset)."""
    found = {}
    for manifest in sorted(out.glob("*/manifest.json")):
        found[json.loads(manifest.read_text())["config"]["data"]["name"]] = manifest.parent
    return found


def run_recipe(
    out: Path, datasets: list[str], overrides: list[str], extra: list[str]
) -> dict[str, Path]:
    done = run_dirs(out) if out.is_dir() else {}
    todo = [d for d in datasets if d not in done]
    if todo:
        cmd = [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "--multirun",
            f"data={','.join(todo)}",
            *overrides,
            "report=false",
            f"out_dir={out}",
            *extra,
        ]
        print("$", " ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"failed: {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return run_dirs(out)


def load(
    out: Path, datasets: list[str], extra: list[str], only_table: bool, recipes: dict
) -> dict[tuple[str, str], pl.DataFrame]:
    tables = {}
    for name, overrides in recipes.items():
        dirs = (
            run_dirs(out / name)
            if only_table
            else run_recipe(out / name, datasets, overrides, extra)
        )
        for d in datasets:
            if d not in dirs:
                raise DataError(
                    str(out / name), f"no finished run of data={d}", "run without --only-table"
                )
            tables[(name, d)] = pl.read_parquet(dirs[d] / "per_query.parquet")
    return tables


def fmt(value: float, metric: str) -> str:
    return f"{100 * value:.1f}" if metric.startswith("recall") else f"{value:.3f}"


def fmt_ci(mean: float, low: float, high: float, metric: str) -> str:
    return f"{fmt(mean, metric)} [{fmt(low, metric)}, {fmt(high, metric)}]"


def report(
    tables: dict[tuple[str, str], pl.DataFrame],
    datasets: list[str],
    recipes: dict,
    search_only: bool = False,
) -> str:
    metric = {d: METRIC[d] for d in datasets}
    scores = [
        [name, *[fmt(float(tables[(name, d)][metric[d]].mean()), metric[d]) for d in datasets]]
        for name in recipes
    ]
    rows = [
        [
            r["held_out"],
            r["metric"],
            r["chosen"],
            f"{r['fit_worst_regret']:.3f}",  # fit sets' own metrics
            fmt_ci(r["held_out_mean"], r["low"], r["high"], r["metric"]),
            f"{r['oracle']} ({fmt(r['oracle_mean'], r['metric'])})",
        ]
        for r in lodo_table(tables, metric, candidates(recipes, search_only)).iter_rows(named=True)
    ]
    gains = [
        [
            r["dataset"],
            r["recipe"],
            r["half"],
            str(r["n"]),
            fmt_ci(r["gain"], r["low"], r["high"], r["metric"]),
        ]
        for r in half_gains(tables, metric, "best", list(RECIPES)).iter_rows(named=True)
    ]
    drawn = [[name, " ".join(o[1:])] for name, o in recipes.items() if name not in RECIPES]
    return "\n".join(
        [
            markdown_table(["recipe", *[f"{d} {metric[d]}" for d in datasets]], scores),
            "",
            markdown_table(
                [
                    "held out",
                    "metric",
                    "chosen on the other two",
                    "its worst fit shortfall (fraction)",
                    "held-out score [95% CI]",
                    "held-out oracle",
                ],
                rows,
            ),
            "",
            markdown_table(
                ["dataset", "recipe", "query half", "n", "gain over best [95% CI]"], gains
            ),
            "",
            *([markdown_table(["recipe", "preset=best and"], drawn), ""] if drawn else []),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/lodo"))
    ap.add_argument("--data", default="locomo,musique,scifact")
    ap.add_argument("--only-table", action="store_true", help="read finished runs, run nothing")
    ap.add_argument("--search", type=int, default=0, help="recipes drawn from the best space")
    ap.add_argument("--seed", type=int, default=13, help="seed of the --search draws")
    ap.add_argument(
        "--search-only",
        action="store_true",
        help="folds choose among the drawn recipes only (a held-out set no candidate was fitted on)",
    )
    args = ap.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    datasets = args.data.split(",")

    def text() -> str:
        for d in datasets:
            require_one_of("--data", d, METRIC)
        recipes = RECIPES | searched(args.search, args.seed)
        tables = load(args.out, datasets, extra, args.only_table, recipes)
        return report(tables, datasets, recipes, args.search_only) + "\n"

    return reported(lambda: print(text(), end=""))


if __name__ == "__main__":
    sys.exit(main())
