"""The search behind ``recall tune`` (its command line: ``pipeline.cli.tune``): search a preset's
weights on a dev set with Hydra's Optuna sweeper and write the best values as a new preset file,
with the score it reached.

    recall tune data=locomo preset=best tune.trials=40 tune.seed=13 [tune.space=best] [tune.name=best_locomo]

1. The search space is entry ``<space>`` of ``conf/tune_spaces.yaml`` (default: the preset's name): config key →
   Hydra sweep expression (``interval(a, b)``, ``range(a, b)``, ``choice(...)``, ``tag(log, ...)``).
2. ``recall run --multirun hydra/sweeper=optuna`` fits on query half ``a`` (``query_part=a``) with a
   seeded TPE sampler, one trial at a time, maximising ``tune.metric``: the same seed, the same trials.
3. ``conf/preset/<name>.yaml`` = the base preset with the best values; its header records the command
   and the scores. Tune never overwrites a preset: when that file exists (a shipped preset such as
   ``best_musique``, or an earlier tune), it writes ``<name>_2.yaml`` (the first free number).
4. The new preset is run on half ``a`` (it must reproduce the best trial), on the held-out half ``b``
   and on all queries, the base preset on both halves; the scores are printed and written into the
   header, with a note when the tuned preset does not beat the base on half ``b``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from pipeline.contract import io
from pipeline.contract.errors import ConfigError
from pipeline.contract.paths import CONF_DIR


def _fail(args: list[str], stderr: str) -> ConfigError:
    said = [x for x in stderr.splitlines() if x.startswith("error: ")]
    if len(said) == 1:  # the run's own one-line error (a bad option or config) is tune's
        return ConfigError(said[0].removeprefix("error: "))
    return ConfigError(f"recall run {' '.join(args)} failed:\n{stderr.strip()[-2000:]}")


def _recall(args: list[str], on_run=None) -> None:
    """``recall run <args>`` in a subprocess; ``on_run(run_dir)`` is called as each run (each trial
    of a sweep) prints its ``run directory:`` line, so a long sweep shows progress."""
    cmd = [sys.executable, "-m", "pipeline.cli.main", "run", *args]
    with tempfile.TemporaryFile("w+") as err:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            for line in proc.stdout:
                if on_run and line.startswith("run directory: "):
                    on_run(Path(line.removeprefix("run directory: ").strip()))
        if proc.returncode != 0:
            err.seek(0)
            raise _fail(args, err.read())


def free_name(name: str) -> str:
    """``name`` when ``conf/preset/<name>.yaml`` does not exist, else ``<name>_2``, ``<name>_3``...:
    tune never overwrites a preset (shipped or written before)."""
    taken = {p.stem for p in (CONF_DIR / "preset").glob("*.yaml")}
    n, free = 1, name
    while free in taken:
        n += 1
        free = f"{name}_{n}"
    return free


class _Trials:
    """Prints one line per finished trial of the sweep: its metric and the best so far."""

    def __init__(self, trials: int, metric: str):
        self.trials, self.metric, self.done, self.best = trials, metric, 0, float("-inf")

    def __call__(self, run_dir: Path) -> None:
        self.done += 1
        try:
            value = _metric(run_dir, self.metric)
        except (OSError, KeyError, ValueError):  # the sweep itself reports a missing metric
            print(f"trial {self.done}/{self.trials}: done ({run_dir})", flush=True)
            return
        self.best = max(self.best, value)
        print(
            f"trial {self.done}/{self.trials}: {self.metric} {value:.4f} on half a "
            f"(best {self.best:.4f})",
            flush=True,
        )


def _metric(run_dir: Path, metric: str) -> float:
    return float(json.loads((run_dir / "metrics.json").read_text())[metric])


def rounded(value):
    """A tuned float to 6 significant digits (a readable preset; far below any metric's resolution)."""
    return float(f"{value:.6g}") if isinstance(value, float) else value


def preset_text(base: str, best: dict, name: str, header: list[str]) -> str:
    """A preset that starts from ``base`` (``defaults: [<base>, _self_]``) and sets only what the
    search chose: group choices as ``override /group: value`` entries, other keys at their dotted
    path, floats rounded (:func:`rounded`)."""
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    doc: dict = {}
    for key, value in sorted(best.items()):
        if key in groups:
            continue
        node = doc
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = rounded(value)
    choices = [{f"override /{k}": v} for k, v in sorted(best.items()) if k in groups]
    body = yaml.safe_dump(
        {"defaults": [base, "_self_", *choices], "preset_name": name, **doc}, sort_keys=False
    )
    return "# @package _global_\n" + "".join(f"# {h}\n" for h in header) + body


@dataclass(frozen=True)
class Tuning:
    """What ``recall tune`` searches and writes (its command line: ``pipeline.cli.tune``)."""

    base: str  # the preset the search starts from
    data: str
    trials: int
    seed: int
    metric: str  # maximised on query half a
    space: str  # the entry of conf/tune_spaces.yaml
    name: str  # the preset to write: a free name (:func:`free_name`)
    out: Path  # the sweep's folder, and the final runs'
    overrides: list[str]  # the run overrides of the command line (data=, preset=, tune.* included)
    command: str  # the command line, recorded in the preset's header


def tune(t: Tuning) -> tuple[Path, float, dict[tuple[str, str | None], float]]:
    """Sweep ``t.space``, write the best values as ``conf/preset/<t.name>.yaml`` and score it on
    both query halves against the base preset; (the preset's path, the best trial's value, the
    scores by (preset, half)). Prints a line per trial and per final run as they finish."""
    space = search_space(t.space)
    passthrough = [a for a in t.overrides if not a.startswith(("out_dir=", "query_part="))]
    _recall(
        _sweep_args(passthrough, t.out, t.trials, t.seed, t.name, space),
        _Trials(t.trials, t.metric),
    )
    res = yaml.safe_load((t.out / "optimization_results.yaml").read_text())
    best, best_value = dict(res["best_params"]), float(res["best_value"])
    header = [
        f"Written by `{t.command}`",
        f"from preset {t.base!r}; search space {t.space!r} of conf/tune_spaces.yaml; {t.trials} TPE trials, "
        f"seed {t.seed}; fitted on query half a of data={t.data}.",
        f"best trial: {t.metric} = {best_value:.4f} on half a",
    ]
    path = CONF_DIR / "preset" / f"{t.name}.yaml"
    io.atomic_write_bytes(path, preset_text(t.base, best, t.name, header).encode())
    rest = [a for a in passthrough if not a.startswith(("preset=", "data=", "tune."))]
    scores = _final_scores(t.name, t.base, t.data, rest, t.out, t.metric)
    header.append(
        f"rerun of this preset: {t.metric} half a {scores[(t.name, 'a')]:.4f}, held-out half b "
        f"{scores[(t.name, 'b')]:.4f}, all queries {scores[(t.name, None)]:.4f}"
    )
    header.append(
        f"base preset {t.base!r}: half a {scores[(t.base, 'a')]:.4f}, half b {scores[(t.base, 'b')]:.4f}"
    )
    io.atomic_write_bytes(path, preset_text(t.base, best, t.name, header).encode())
    return path, best_value, scores


def search_space(space_name: str) -> dict:
    """Entry ``space_name`` of conf/tune_spaces.yaml (config key → sweep expression)."""
    spaces = yaml.safe_load((CONF_DIR / "tune_spaces.yaml").read_text()) or {}
    if space_name not in spaces:
        raise ConfigError(
            f"{CONF_DIR / 'tune_spaces.yaml'}: no search space named {space_name!r}; "
            f"give tune.space=<one of {sorted(spaces)}> or add one there"
        )
    return spaces[space_name]


_TAG = re.compile(r"\s*tag\(\s*(?P<tag>\w+)\s*,(?P<inner>.*)\)\s*")
_RANGE = re.compile(
    r"\s*(?P<kind>interval|range)\(\s*(?P<a>[-+0-9.eE]+)\s*,\s*(?P<b>[-+0-9.eE]+)\s*\)\s*"
)


def _parse_sweep(expr: str) -> tuple[str, str | None, float, float] | None:
    """``interval(a, b)``, ``range(a, b)`` or ``tag(log, interval(a, b))`` → (kind, tag, a, b)."""
    tagged = _TAG.fullmatch(expr)
    tag, inner = (tagged["tag"], tagged["inner"]) if tagged else (None, expr)
    m = _RANGE.fullmatch(inner)
    if not m or tag not in (None, "log") or (tag and m["kind"] != "interval"):
        return None
    return m["kind"], tag, float(m["a"]), float(m["b"])


def sample_space(space: dict, n: int, seed: int) -> list[dict[str, float | int]]:
    """``n`` points drawn at random from a search space of conf/tune_spaces.yaml, seeded: each key
    independently, ``interval(a, b)`` uniform in [a, b), ``tag(log, interval(a, b))`` log-uniform,
    ``range(a, b)`` an integer in [a, b) (Hydra's meaning). Keys in the order given."""
    rng = np.random.default_rng(seed)
    parsed = {}
    for key, expr in space.items():
        parsed[key] = _parse_sweep(str(expr))
        if parsed[key] is None:
            raise ConfigError(
                f"{CONF_DIR / 'tune_spaces.yaml'}: {key}: {expr!r} cannot be sampled; use "
                "interval(a, b), range(a, b) or tag(log, interval(a, b))"
            )
    points = []
    for _ in range(n):
        point: dict[str, float | int] = {}
        for key, (kind, tag, a, b) in parsed.items():
            if kind == "range":
                point[key] = int(rng.integers(int(a), int(b)))
            elif tag == "log":
                point[key] = float(np.exp(rng.uniform(np.log(a), np.log(b))))
            else:
                point[key] = float(rng.uniform(a, b))
        points.append(point)
    return points


def _sweep_args(
    passthrough: list[str], out: Path, trials: int, seed: int, name: str, space: dict
) -> list[str]:
    """The ``recall run --multirun`` arguments of the Optuna sweep on query half a."""
    return [
        "--multirun",
        *passthrough,
        "query_part=a",
        "report=false",
        f"out_dir={out}",
        "hydra/sweeper=optuna",
        "hydra.sweeper.direction=maximize",
        f"hydra.sweeper.n_trials={trials}",
        "hydra.sweeper.n_jobs=1",
        f"hydra.sweeper.sampler.seed={seed}",
        f"hydra.sweeper.study_name={name}",
        *[f"{k}={v}" for k, v in space.items()],
    ]


def _final_scores(
    name: str, base: str, data: str, rest: list[str], out: Path, metric: str
) -> dict[tuple[str, str | None], float]:
    """``metric`` by (preset, query half) of the reruns: the tuned preset on a, b, all; the base on a, b."""
    scores = {}
    for preset, part in ((name, "a"), (name, "b"), (name, None), (base, "a"), (base, "b")):
        run_dir = out / f"final-{preset}-{part or 'all'}"
        extra = [f"query_part={part}"] if part else []
        where = f"half {part}" if part else "all queries"
        print(f"final run {len(scores) + 1}/5: preset {preset} on {where}", flush=True)
        _recall(
            [
                f"data={data}",
                *rest,
                f"preset={preset}",
                "report=false",
                f"out_dir={run_dir}",
                *extra,
            ]
        )
        scores[(preset, part)] = _metric(run_dir, metric)
    return scores


def score_lines(name: str, base: str, scores: dict) -> list[str]:
    """The printed rerun and base-preset score lines, with a note when the base is not beaten on b."""
    return [
        f"rerun: half a {scores[(name, 'a')]:.4f}, held-out half b {scores[(name, 'b')]:.4f}, "
        f"all {scores[(name, None)]:.4f}",
        f"base preset {base}: half a {scores[(base, 'a')]:.4f}, held-out half b {scores[(base, 'b')]:.4f}"
        + (
            ""
            if scores[(name, "b")] > scores[(base, "b")]
            else f"  (not beaten on half b: keep {base})"
        ),
    ]
