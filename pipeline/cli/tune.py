"""``recall tune data=<d> preset=<p> [tune.trials=40 tune.metric=recall@5 tune.seed=13
tune.space=<entry of conf/tune_spaces.yaml> tune.name=<new preset>] [run overrides]``: the command
line of ``pipeline.run.tune`` (what the search does is documented there). Prints one line per
trial and per final run, then the scores and the preset file written."""

from __future__ import annotations

from pathlib import Path

from pipeline.contract.errors import ConfigError


def _opt(args: list[str], key: str, default: str | None = None) -> str | None:
    """The value of the first ``key=value`` argument, else ``default``."""
    for a in args:
        if a.startswith(key + "="):
            return a.split("=", 1)[1]
    return default


def _int_opt(args: list[str], key: str, default: str) -> int:
    """An integer option, or a ConfigError naming it."""
    value = _opt(args, key, default)
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not an integer; give e.g. {key}={default}") from None


def main(args: list[str]) -> int:
    """``recall tune``: sweep a preset's search space, write the best values as a preset and score it; 0 on success."""
    from pipeline.run.tune import Tuning, free_name, score_lines, tune

    base = _opt(args, "preset", "best")
    data = _opt(args, "data", "sample")
    trials, seed = _int_opt(args, "tune.trials", "40"), _int_opt(args, "tune.seed", "13")
    metric = _opt(args, "tune.metric", "recall@5")
    wanted = _opt(args, "tune.name", None) or f"{base}_{data}"
    if wanted in ("null", "None"):
        wanted = f"{base}_{data}"
    name = free_name(wanted)
    if name != wanted:
        print(f"conf/preset/{wanted}.yaml exists (tune never overwrites a preset): writing {name}")
    t = Tuning(
        base=base,
        data=data,
        trials=trials,
        seed=seed,
        metric=metric,
        space=_opt(args, "tune.space", None) or base,
        name=name,
        out=Path(_opt(args, "out_dir", None) or f"runs/tune-{name}"),
        overrides=list(args),
        command="recall tune " + " ".join(args),
    )
    path, best_value, scores = tune(t)
    print(f"best {metric} on half a: {best_value:.4f} (trials in {t.out})")
    for line in score_lines(name, base, scores):
        print(line)
    print(f"wrote {path} (use: recall run data={data} preset={name})")
    return 0
