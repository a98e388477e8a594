"""``recall run [hydra overrides]``: run recall for every query of a dataset and write a run
directory (``pipeline.run.runner``); ``--multirun`` sweeps too, and ``recall tune``'s trials are
such a sweep (the job's return value is their objective). Prints the metrics table and the run
directory."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pipeline.contract.errors import reported

if TYPE_CHECKING:
    from omegaconf import DictConfig


def summary_table(metrics: dict | None, out_dir: str) -> str:
    """The metrics as a fixed-width table (overall, then one row per query group) and the run directory."""
    from pipeline.metrics.evaluate import judged_warning, metric_names

    lines = []
    if metrics:
        names = metric_names(metrics)
        head = f"{'group':<14}{'n':>6}" + "".join(f"{m:>11}" for m in names)
        lines += [head, "-" * len(head)]
        rows = [("all", metrics)] + sorted(metrics["by_group"].items())
        for g, m in rows:
            lines.append(
                f"{str(g)[:13]:<14}{m['n_queries']:>6}" + "".join(f"{m[x]:>11.4f}" for x in names)
            )
        lines += judged_warning(metrics)
    lines.append(f"run directory: {out_dir}")
    return "\n".join(lines)


def job(cfg: DictConfig) -> float | None:
    """One run of the composed config into Hydra's output directory; the value of
    ``tune.metric`` (the objective under ``recall tune``), None without metrics."""
    from hydra.core.hydra_config import HydraConfig

    from pipeline.run import runner

    out_dir = HydraConfig.get().runtime.output_dir
    result = {}
    status = reported(lambda: result.update(runner.run(cfg, out_dir)))
    if status:
        sys.exit(status)
    print(summary_table(result["metrics"], result["out_dir"]))
    return (result["metrics"] or {}).get(cfg.tune.metric)


def main(args: list[str]) -> int:
    """``recall run [overrides]``: compose the config (Hydra, guarded) and run :func:`job`; 0."""
    from pipeline.cli.hydra_guard import launch

    launch("recall run", args, job)
    return 0
